"""A local server speaking OpenAI's streamed chat completions (``stream: true``).

The real endpoints are third-party cloud APIs (or a local Ollama, llama.cpp or vLLM the
tests cannot assume), so the LLM skill's streaming is tested, and benchmarked, against
this: ``POST /v1/chat/completions`` answers ``data: {chunk}`` events, one per token, at a
fixed rate and no more than its ``max_tokens`` (then the ``length`` finish), then (when
asked with ``stream_options.include_usage``) a usage chunk, then ``data: [DONE]``; a
request without ``stream: true`` gets the whole completion as JSON, with its ``usage``.
Each token counts as one completion token, each message as one prompt token.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse


def chunk(content: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


#: How long a held stream waits for its event: past any test's checks, bounded all the same.
HOLD_TIMEOUT = 60.0


class StreamingOpenAI:
    """Answers ``tokens`` one every ``interval`` seconds; records the request bodies and
    the client's address of each (``peers``: one connection kept for several requests
    shows as one address). ``fail_after``: the stream breaks (a chunk that is not JSON)
    after that many tokens; ``hold``: every stream waits for that event before its first
    token; ``linger``: every stream's body stays open after its ``[DONE]`` until that
    event."""

    def __init__(
        self,
        tokens: list[str],
        interval: float = 0.0,
        fail_after: int | None = None,
        hold: threading.Event | None = None,
        linger: threading.Event | None = None,
    ) -> None:
        self.tokens = tokens
        self.interval = interval
        self.fail_after = fail_after
        self.hold = hold
        self.linger = linger
        self.requests: list[dict[str, Any]] = []
        self.peers: list[tuple[str, int] | None] = []
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.complete)

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        client = request.client
        self.peers.append(None if client is None else (client.host, client.port))
        usage = self.usage(body)
        if not body.get("stream"):
            text = "".join(self.tokens[: usage["completion_tokens"]])
            return JSONResponse(
                {
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                    "usage": usage,
                }
            )
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(
            self._events(usage["completion_tokens"], usage if with_usage else None),
            media_type="text/event-stream",
        )

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """What the answer to ``body`` costs: a token per message in, per token out
        (``max_tokens`` applies, as it does at a real endpoint)."""
        prompt = len(body.get("messages", []))
        completion = min(len(self.tokens), int(body.get("max_tokens") or len(self.tokens)))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def spent(self) -> int:
        """The tokens every request so far cost, as their usage says."""
        return sum(self.usage(body)["total_tokens"] for body in self.requests)

    async def _events(
        self, count: int, usage: dict[str, int] | None = None
    ) -> AsyncIterator[bytes]:
        yield b"data: " + json.dumps(chunk(None)).encode() + b"\n\n"  # the role chunk
        if self.hold is not None:
            await asyncio.to_thread(self.hold.wait, HOLD_TIMEOUT)
        for index, token in enumerate(self.tokens[:count]):
            if self.fail_after is not None and index == self.fail_after:
                yield b"data: {broken\n\n"
                return
            if self.interval:
                await asyncio.sleep(self.interval)  # the model's token rate
            yield b"data: " + json.dumps(chunk(token)).encode() + b"\n\n"
        finish = "length" if count < len(self.tokens) else "stop"
        yield b"data: " + json.dumps(chunk(None, finish)).encode() + b"\n\n"
        if usage is not None:
            yield b"data: " + json.dumps({**chunk(None), "choices": [], "usage": usage}).encode()
            yield b"\n\n"
        yield b"data: [DONE]\n\n"
        if self.linger is not None:
            await asyncio.to_thread(self.linger.wait, HOLD_TIMEOUT)
