"""An OpenAI-compatible chat-completions endpoint that answers at once, for
:mod:`bench.routing`: what matters there is which turns reach the LLM, not how fast it
writes, so every answer is one short sentence in a few pieces with no wait between them
(streamed as ``data:`` events when asked with ``stream: true``, else one JSON answer). It
counts the requests it was sent (``GET /log``), so a benchmark can check the turn
records' account of the LLM calls against the LLM's own.

    .venv/bin/python -m uvicorn bench.fast_llm:app --port 8999
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

#: The answer, in the pieces it streams; numbered (" #3"), so that no two answers of a
#: dialog are the same text (the response selector holds back a repeat of the bot).
PIECES = ["An ", "answer ", "from ", "the ", "LLM"]

app = FastAPI()
requests: list[int] = []


def _chunk(content: str | None, usage: dict[str, int] | None = None) -> bytes:
    choices = [] if usage else [{"index": 0, "delta": {"content": content} if content else {}}]
    body: dict[str, Any] = {"object": "chat.completion.chunk", "choices": choices}
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


@app.post("/v1/chat/completions")
async def complete(request: Request) -> Response:
    body = await request.json()
    requests.append(len(body.get("messages", [])))
    pieces = [*PIECES, f" #{len(requests)}."]
    prompt = len(body.get("messages", [])) * 20
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": len(pieces),
        "total_tokens": prompt + len(pieces),
    }
    if not body.get("stream"):
        message = {"role": "assistant", "content": "".join(pieces)}
        return JSONResponse({"choices": [{"index": 0, "message": message}], "usage": usage})

    async def events() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield _chunk(piece)
        if (body.get("stream_options") or {}).get("include_usage"):
            yield _chunk(None, usage)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@app.get("/log")
async def requests_log() -> dict[str, int]:
    """How many completions were asked for since the server started."""
    return {"requests": len(requests)}


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
