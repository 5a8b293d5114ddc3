"""A slow OpenAI-compatible chat-completions endpoint for :mod:`bench.llm_turns`: every
answer is ``PIECES`` pieces ``INTERVAL`` seconds apart (3 s in all, as a hosted model
answering a few sentences), or fewer when the request's ``max_tokens`` says so (as at a
real endpoint), streamed as ``data:`` events when asked with ``stream: true``.

It keeps, for each request, when it arrived and when each piece was sent, on the
system-wide monotonic clock (``time.monotonic``, the same in every process of the
machine), and serves them at ``GET /log``, so the benchmark can take the model's own time
out of what the client saw.

    .venv/bin/python -m uvicorn bench.slow_llm:app --port 8999
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

PIECES = 10
INTERVAL = 0.3
WORDS = ["Light ", "from ", "the ", "sun ", "scatters ", "off ", "the ", "air, ", "blue ", "most."]

app = FastAPI()
log: list[dict[str, Any]] = []


def _chunk(content: str | None, usage: dict[str, int] | None = None) -> bytes:
    choices = [] if usage else [{"index": 0, "delta": {"content": content} if content else {}}]
    body: dict[str, Any] = {"object": "chat.completion.chunk", "choices": choices}
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


@app.post("/v1/chat/completions")
async def complete(request: Request) -> Response:
    body = await request.json()
    record: dict[str, Any] = {"received": time.monotonic(), "pieces": []}
    log.append(record)
    pieces = min(PIECES, int(body.get("max_tokens") or PIECES))
    words = (WORDS * PIECES)[:pieces]
    usage = {
        "prompt_tokens": len(body.get("messages", [])) * 20,
        "completion_tokens": pieces,
        "total_tokens": len(body.get("messages", [])) * 20 + pieces,
    }
    if not body.get("stream"):
        await asyncio.sleep(pieces * INTERVAL)
        message = {"role": "assistant", "content": "".join(words)}
        return JSONResponse({"choices": [{"index": 0, "message": message}], "usage": usage})

    async def events() -> AsyncIterator[bytes]:
        for word in words:
            await asyncio.sleep(INTERVAL)
            record["pieces"].append(time.monotonic())
            yield _chunk(word)
        if (body.get("stream_options") or {}).get("include_usage"):
            yield _chunk(None, usage)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@app.get("/log")
async def requests_log() -> list[dict[str, Any]]:
    return log


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
