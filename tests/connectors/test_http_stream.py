"""Reading a streaming skill's answer shares the event loop: a real HTTP server sends a
stream of 130,000 one-character tokens (within the 2 MB answer limit) in one write, and
another task on the reader's loop must run between every few lines, not wait for a whole
buffer of them to be parsed."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent.connectors.http import YIELD_EVERY_LINES, HttpConnector, make_transport
from agent.sdk.models import DialogView
from agent.sdk.streaming import STREAM_MEDIA_TYPE, line
from tests.support.servers import serving
from tests.support.views import view

TOKENS = 130_000


def many_tokens_skill() -> Starlette:
    """Answers every call with the whole stream as one body: the reader finds it buffered."""
    body = b"".join(
        [
            line("start", {"confidence": 0.9}),
            *(line("token", "a") for _ in range(TOKENS)),
            line("end", [{"text": "a" * TOKENS, "confidence": 0.9}]),
        ]
    )

    async def answer(request: Request) -> Response:
        await request.body()
        return Response(body, media_type=STREAM_MEDIA_TYPE)

    return Starlette(routes=[Route("/", answer, methods=["POST"])])


async def lines_between_other_work(url: str) -> tuple[list[int], Any]:
    """How many lines were read between two runs of another task on the same loop, and
    the streamed output."""
    ticks = 0
    stop = asyncio.Event()

    async def other_user() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    transport = make_transport()
    ticker = asyncio.create_task(other_user())
    runs: list[int] = []
    lines_since, seen = 0, ticks
    output: Any = None
    try:
        connector = HttpConnector("story", url, transport, timeout=60)
        dialog = DialogView.model_validate(view("Tell me a story"))
        async for kind, value in connector.stream(dialog):
            if ticks != seen:
                runs.append(lines_since)
                lines_since, seen = 0, ticks
            lines_since += 1
            if kind == "end":
                output = value
        runs.append(lines_since)
    finally:
        stop.set()
        await ticker
        await transport.aclose()
    return runs, output


def test_a_buffer_full_of_streamed_lines_leaves_the_loop_to_others_every_few_lines() -> None:
    with serving(many_tokens_skill()) as skill:
        runs, output = asyncio.run(lines_between_other_work(skill.url))
    assert output == [{"text": "a" * TOKENS, "confidence": 0.9}]
    assert sum(runs) == TOKENS + 2  # every line was read, start and end included
    assert max(runs) <= YIELD_EVERY_LINES + 1, (
        f"{max(runs)} lines were read without the loop running anything else"
    )
