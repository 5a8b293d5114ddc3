"""Services a test pipeline names by module (``"connector": {"module": ...}``), so the agent
calls them in its own process: they live at module level, where the agent imports them."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import HTTPException

from agent.sdk import DialogView, Service, SkillHypothesis, StreamStart

#: What the ``lifespan`` service's resource went through, in order.
LIFESPAN_EVENTS: list[str] = []

meddler = Service("meddler")


@meddler.skill
async def meddle(dialog: DialogView) -> SkillHypothesis:
    """Changes everything it is shown, then answers what it found before: none of its
    changes may reach the state, nor what it or another service is shown next."""
    seen = sorted(dialog.human.attributes)
    dialog.human.attributes["meddled"] = True
    dialog.bot.attributes["meddled"] = True
    dialog.human_utterance.annotations["meddled"] = True
    dialog.human_utterance.attributes["meddled"] = True
    for utterance in dialog.utterances:
        utterance.text = "meddled"
    return SkillHypothesis(text=f"found {seen}", confidence=0.9)


refuser = Service("refuser")


@refuser.skill
async def refuse(dialog: DialogView) -> SkillHypothesis:
    raise HTTPException(503, detail="no model loaded")


crasher = Service("crasher")


@crasher.skill
async def crash(dialog: DialogView) -> SkillHypothesis:
    raise RuntimeError("a bug in the skill")


bad_shape = Service("bad_shape")


@bad_shape.skill
async def wrong(dialog: DialogView) -> SkillHypothesis:
    return "not a hypothesis"  # type: ignore[return-value]


lifespan = Service("lifespan")


@asynccontextmanager
async def _resource() -> AsyncIterator[None]:
    LIFESPAN_EVENTS.append("open")
    try:
        yield
    finally:
        LIFESPAN_EVENTS.append("close")


lifespan.lifespan(_resource)


@lifespan.skill
async def report_open(dialog: DialogView) -> SkillHypothesis:
    return SkillHypothesis(text=f"events: {' '.join(LIFESPAN_EVENTS)}", confidence=0.5)


def make_echo() -> Service:
    """A factory: the agent calls it when it starts."""
    service = Service("echo")

    @service.skill
    async def echo(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(text=f"echo: {dialog.human_utterance.text}", confidence=0.5)

    return service


streamer = Service("streamer")


@streamer.skill
async def stream(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
    yield StreamStart(confidence=0.7)
    for word in ["one ", "two ", "three"]:
        yield word


not_a_service = "a string"


def make_nothing() -> None:
    """A factory that forgets to return its service."""


exiter = Service("exiter")


@exiter.skill
async def exit_now(dialog: DialogView) -> SkillHypothesis:
    """A handler that asks the process to end: over HTTP it would end its own server."""
    sys.exit(3)


interrupter = Service("interrupter")


@interrupter.skill
async def interrupt(dialog: DialogView) -> SkillHypothesis:
    raise KeyboardInterrupt


sync_exiter = Service("sync_exiter")


@sync_exiter.skill
def exit_in_thread(dialog: DialogView) -> SkillHypothesis:
    """A sync handler: it runs in a worker thread, whose exit the call would re-raise."""
    sys.exit("bye")


stream_exiter = Service("stream_exiter")


@stream_exiter.skill
async def exit_while_streaming(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
    yield StreamStart(confidence=0.99)
    yield "about to "
    sys.exit(4)


#: Calls each blocking service has had.
CALLS: Counter[str] = Counter()
#: Seconds :data:`blocker` holds the loop; its pipeline entry's timeout is below it.
BLOCK_SECONDS = 1.5

blocker = Service("blocker")


@blocker.skill
async def block(dialog: DialogView) -> SkillHypothesis:
    """An async handler that blocks (a sync HTTP client, a model run on the loop)."""
    CALLS["blocker"] += 1
    time.sleep(BLOCK_SECONDS)  # noqa: ASYNC251 - the fault under test
    return SkillHypothesis(text="late but confident", confidence=1.0)


#: Lets :data:`hanger`'s calls end; until then each holds its thread.
RELEASE = threading.Event()
#: :data:`hanger`'s calls still running in their threads.
HANGING: Counter[str] = Counter()
_hanging = threading.Lock()

hanger = Service("hanger")


@hanger.skill
def hang(dialog: DialogView) -> SkillHypothesis:
    """A sync handler that hangs (a model call without a timeout): given up at its timeout,
    its call runs on in its thread, which Python cannot stop."""
    with _hanging:
        HANGING["hanger"] += 1
    try:
        RELEASE.wait(120)
    finally:
        with _hanging:
            HANGING["hanger"] -= 1
    return SkillHypothesis(text="released", confidence=1.0)


#: A file :data:`stuck`'s lifespan creates as it starts opening (its path from this
#: variable), so that a test knows the agent is waiting for it.
STUCK_MARK = "STUCK_LIFESPAN_MARK"

stuck = Service("stuck")


@asynccontextmanager
async def _never_opens() -> AsyncIterator[None]:
    """A resource that never opens (a model server that never answers its first call)."""
    mark = os.environ.get(STUCK_MARK)
    if mark:
        await asyncio.to_thread(Path(mark).touch)
    await asyncio.Event().wait()
    yield


stuck.lifespan(_never_opens)


@stuck.skill
async def never_called(dialog: DialogView) -> SkillHypothesis:
    return SkillHypothesis(text="opened after all", confidence=1.0)


#: Pieces :data:`flood` streams: 14 bytes each as a line over HTTP (``{"token":"x"}``), and
#: counted so in the agent: 2.24 MB, over the 2 MB (2,097,152 bytes) an answer may be. The
#: refusal comes at the limit, so pieces past it only cost the test (300,000 did: 4.2 MB).
FLOOD_PIECES = 160_000

flood = Service("flood")


@flood.skill
async def pour(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
    """A skill streaming one character at a time, never waiting for anything."""
    yield StreamStart(confidence=1.0)
    for _ in range(FLOOD_PIECES):
        yield "x"


#: Set by :data:`trickle` once it streams.
TRICKLING = threading.Event()
#: Set by a test once /ping has answered while :data:`trickle` streams.
PINGED = threading.Event()
#: Whether :data:`trickle` saw :data:`PINGED` before it ran out of pieces.
TRICKLE_SAW_PING: list[bool] = []

trickle = Service("trickle")


@trickle.skill
async def drip(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
    """A skill that never awaits: it makes each piece on the loop (a millisecond of CPU
    each) and goes on until /ping has answered meanwhile, or its pieces run out."""
    yield StreamStart(confidence=1.0)
    TRICKLING.set()
    for _ in range(5_000):
        if PINGED.is_set():
            break
        time.sleep(0.001)  # noqa: ASYNC251 - the fault under test
        yield "."
    TRICKLE_SAW_PING.append(PINGED.is_set())


#: Hypotheses :data:`crowd` answers: as JSON, well over the 2 MB an answer may be.
CROWD = 50_000

crowd = Service("crowd")


@crowd.skill
async def answer_everything(dialog: DialogView) -> list[SkillHypothesis]:
    return [SkillHypothesis(text="x", confidence=0.5) for _ in range(CROWD)]
