"""Where an in-process sync handler runs: in its threads; if its service promised it never
blocks, on the event loop once its calls have shown it quick, and back in its threads, for
a longer trial, after a slow call there."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from agent.connectors.errors import BadServiceResponse
from agent.connectors.handler_threads import HandlerThreads
from agent.connectors.in_process import InProcessConnector
from agent.connectors.quick_calls import QUICK_CALL, QUICK_CPU, TRIAL_CALLS, SyncCalls
from agent.sdk import DialogView, Service, SkillHypothesis
from tests.support.views import view

#: Calls a quick handler gets to reach the loop: on a busy machine a call in a thread may
#: wait past the bound for the GIL or a core, which starts the trial again.
PATIENCE = 500


def where() -> threading.Thread:
    return threading.current_thread()


async def trained(calls: SyncCalls) -> list[threading.Thread]:
    """Call a quick handler until it runs on the loop; the threads its calls ran in."""
    ran: list[threading.Thread] = []
    while not calls.inline:
        assert len(ran) < PATIENCE, "a handler answering at once never reached the loop"
        ran.append(await calls.run(where))
    return ran


async def test_a_quick_handler_runs_in_its_threads_then_on_the_loop() -> None:
    calls = SyncCalls(HandlerThreads("quick", limit=4), may_inline=True)
    in_trial = await trained(calls)
    loop_thread = threading.current_thread()
    assert len(in_trial) >= TRIAL_CALLS
    assert all(thread is not loop_thread for thread in in_trial)
    assert [await calls.run(where) for _ in range(3)] == [loop_thread] * 3


async def test_a_slow_call_on_the_loop_sends_the_handler_back_for_a_trial_twice_as_long() -> None:
    calls = SyncCalls(HandlerThreads("sometimes_slow", limit=4), may_inline=True)
    await trained(calls)

    def slow() -> threading.Thread:
        time.sleep(QUICK_CALL * 2)  # the work under test: longer than a quick call
        return threading.current_thread()

    assert await calls.run(slow) is threading.current_thread()  # measured as it ran
    ran = [await calls.run(where) for _ in range(TRIAL_CALLS * 2)]
    assert all(thread is not threading.current_thread() for thread in ran)
    await trained(calls)  # quick again: it comes back
    assert await calls.run(where) is threading.current_thread()


async def test_a_slow_call_during_the_trial_starts_its_count_again() -> None:
    """A first call that loads a model is slow, the next ones quick: the handler reaches
    the loop once it has made the trial's calls in a row quickly, not before."""
    calls = SyncCalls(HandlerThreads("loads_first", limit=4), may_inline=True)
    for _ in range(TRIAL_CALLS - 1):
        await calls.run(where)
    await calls.run(time.sleep, QUICK_CALL * 2)
    for _ in range(TRIAL_CALLS - 1):
        await calls.run(where)
    assert not calls.inline
    assert len(await trained(calls)) >= 1


async def test_a_handler_that_works_longer_than_a_hand_off_stays_in_its_threads() -> None:
    """A handler spending more than a quick call's CPU on each call (a model's inference):
    skipping the hand-off would save it little and hold every other turn meanwhile."""
    calls = SyncCalls(HandlerThreads("heavy", limit=4), may_inline=True)

    def work() -> threading.Thread:
        started = time.thread_time()
        while time.thread_time() - started <= QUICK_CPU * 2:  # the work under test
            pass
        return threading.current_thread()

    ran = [await calls.run(work) for _ in range(TRIAL_CALLS * 2)]
    assert all(thread is not threading.current_thread() for thread in ran)
    assert not calls.inline


async def test_a_handler_on_the_loop_sets_nothing_in_its_caller_s_context() -> None:
    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="caller's")
    calls = SyncCalls(HandlerThreads("setter", limit=4), may_inline=True)
    await trained(calls)
    await calls.run(mark.set, "handler's")
    assert calls.inline
    assert mark.get() == "caller's"


async def test_an_exit_asked_by_a_handler_on_the_loop_fails_only_its_call() -> None:
    exits = Service("exits", never_blocks=True)

    @exits.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        if dialog.human_utterance.text == "bye":
            raise SystemExit(3)
        return SkillHypothesis(text="hello", confidence=0.9)

    connector = InProcessConnector("exits", exits)
    shown = DialogView.model_validate(view("hi"))
    for _ in range(PATIENCE):
        if connector.sync.inline:
            break
        await connector.call([shown])
    assert connector.sync.inline
    with pytest.raises(BadServiceResponse, match="raised SystemExit"):
        await connector.call([DialogView.model_validate(view("bye"))])
    ((hypothesis,),) = await connector.call([shown])
    assert hypothesis["text"] == "hello"


async def test_a_quick_handler_whose_service_made_no_promise_stays_in_its_threads() -> None:
    """Quick calls cannot tell a handler that never blocks from one that blocks on its next
    call: without its service's promise, however many quick calls it made, a call that
    waits holds only its own thread, and the agent's other work goes on meanwhile."""
    started, release = threading.Event(), threading.Event()
    unpromised = Service("unpromised")

    @unpromised.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        if dialog.human_utterance.text != "wait":
            return SkillHypothesis(text="hello", confidence=0.9)
        started.set()
        # the bound only ends a failing run: on the loop, nothing could release it
        text = "released" if release.wait(timeout=10) else "held every turn"
        return SkillHypothesis(text=text, confidence=0.9)

    connector = InProcessConnector("unpromised", unpromised, timeout=30)
    shown = DialogView.model_validate(view("hi"))
    for _ in range(PATIENCE):
        await connector.call([shown])
    waiting = asyncio.ensure_future(connector.call([DialogView.model_validate(view("wait"))]))
    assert await asyncio.to_thread(started.wait, 10)
    release.set()  # the loop's other work, done while the handler waits
    ((hypothesis,),) = await waiting
    assert hypothesis["text"] == "released"
    assert not connector.sync.inline
