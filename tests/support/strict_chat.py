"""A local OpenAI-compatible endpoint with a strict chat template, as vLLM or llama.cpp
serve Llama's, Mistral's or Gemma's: a conversation must be the system message, then user
and assistant messages in turn, ending with the user's. Anything else is refused with a 400
and vLLM's words, so a request the real servers would refuse fails here too.

The real endpoints are third-party services or local servers the tests cannot assume.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

#: What vLLM answers when the template refuses the roles.
REFUSAL = "Conversation roles must alternate user/assistant/user/assistant/..."


def template_accepts(messages: list[dict[str, Any]]) -> bool:
    """Whether a strict template renders ``messages``: system, then user/assistant in turn,
    the user's last."""
    roles = [message.get("role") for message in messages]
    turns = roles[1:]
    alternating = all(
        role == ("user" if index % 2 == 0 else "assistant") for index, role in enumerate(turns)
    )
    return roles[:1] == ["system"] and bool(turns) and alternating and turns[-1] == "user"


class StrictChat:
    """``POST /v1/chat/completions``: refuses what a strict template refuses, else answers
    ``"echo: <the user's last message>"`` as a whole completion. ``requests`` holds every
    body and ``refused`` the ones it refused."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.complete)

    async def complete(self, request: Request) -> JSONResponse:
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        if not template_accepts(body["messages"]):
            self.refused.append(body)
            error = {"object": "error", "message": REFUSAL, "type": "BadRequestError", "code": 400}
            return JSONResponse(error, status_code=400)
        said = body["messages"][-1]["content"]
        message = {"role": "assistant", "content": f"echo: {said}"}
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model", "test-model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            }
        )
