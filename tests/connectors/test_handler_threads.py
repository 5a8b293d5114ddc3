"""The threads an in-process service's sync handler runs in: reused, and still bounded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent.connectors.errors import ServiceUnavailable
from agent.connectors.handler_threads import HandlerThreads


async def test_calls_one_after_another_run_in_one_thread_off_the_loop() -> None:
    """A thread whose call has ended takes the next: ten calls start one thread, not ten,
    and none runs on the event loop's thread."""
    threads = HandlerThreads("echo", limit=4)
    answers = [
        await threads.run(lambda n: (threading.current_thread(), n * 2), n) for n in range(10)
    ]
    assert [doubled for _, doubled in answers] == [n * 2 for n in range(10)]
    assert len({id(thread) for thread, _ in answers}) == 1  # the threads are kept alive here
    assert answers[0][0] is not threading.current_thread()
    assert threads.running == 0


async def test_a_handler_s_error_reaches_the_caller_and_its_thread_serves_on() -> None:
    threads = HandlerThreads("broken", limit=1)

    def fail() -> None:
        raise ValueError("no answer")

    with pytest.raises(ValueError, match="no answer"):
        await threads.run(fail)
    assert await threads.run(lambda: "answer") == "answer"
    assert threads.running == 0


async def test_a_thread_held_by_a_call_is_not_given_another() -> None:
    """While one call holds the service's only thread, the next fails as unavailable; once
    it returns, the thread takes calls again."""
    threads = HandlerThreads("slow", limit=1)
    release = threading.Event()
    started = threading.Event()

    def hold() -> str:
        started.set()
        release.wait()
        return "held"

    held = asyncio.ensure_future(threads.run(hold))
    await asyncio.to_thread(started.wait)
    with pytest.raises(ServiceUnavailable, match="its 1 threads are all still running"):
        await threads.run(lambda: "second")
    release.set()
    assert await held == "held"
    assert await threads.run(lambda: "third") == "third"
