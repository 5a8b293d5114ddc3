"""Turn events: what a client following a turn live is told while it runs.

A channel that wants the events (Server-Sent Events, the WebSocket chat) makes a
:class:`TurnEvents` and hands it to the message flow with the message
(:attr:`~agent.flow.Incoming.events`); the flow hands it on in the turn's value
(:attr:`~agent.turn.value.Turn.events`) to the executor, whose calls report on it, and the
channel reads the events from the same object, in order. Nothing finds it ambiently: a
turn nobody follows carries :data:`UNHEARD`, whose ``emit`` does nothing (both are a
:class:`TurnListener`, what a turn's code is given), so a turn's code never asks whether
anyone listens, and a service call running in the executor's task group reports to its
own turn's listener and never another's, because it is given that listener.

The events, by name (docs/api.md has the wire form):

- ``accepted``: the human utterance is stored (``dialog_id``, ``utt_id``);
- ``progress``: one service's call ended (``service``, ``role``, ``outcome``, and in a
  dp-agent pipeline ``dream_group`` when its service has one);
- ``token``: a piece of the answer's text, from a skill whose answer is certain to be
  chosen (``text``, ``skill``);
- ``answer`` / ``error``: the channel's own last event, the reply or the failure.

``accepted`` and ``progress``, which tell how the turn goes rather than what it answers,
are passed on in batches: each waits at most :data:`PROGRESS_BATCH` seconds, or until a
``token``, the turn's end or its last event comes, and then goes to the channel with every
other one held, in the order they happened. The channel's response starts at the first
(``accepted``), and a stage of in-process services ends a dozen calls within a
millisecond: a channel woken for each would start its response and write them while the
turn's next step (an LLM's request above all) waits for the event loop behind it. Held,
they go out after it (docs/performance.md, "The first token, hop by hop").
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

#: An event's name: the ``event:`` field of Server-Sent Events, ``event`` in ``/chat/ws``.
EventName = Literal["accepted", "progress", "token", "answer", "error"]

T = TypeVar("T")

#: The events that tell how the turn goes rather than what it answers: held for a batch.
HELD = frozenset({"accepted", "progress"})
#: Seconds an event of :data:`HELD` may wait before the channel is given it (module
#: docstring): long enough for a turn's in-process stages to reach their next call, far
#: shorter than a person watching the services being ticked off could tell.
PROGRESS_BATCH = 0.02


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """One event: its name and its JSON-ready data."""

    name: EventName
    data: dict[str, Any]


class TurnListener(Protocol):
    """What a turn reports its events to: a channel's :class:`TurnEvents`, or
    :data:`UNHEARD`."""

    @property
    def listened(self) -> bool:
        """Whether a client follows the turn (a skill's tokens are forwarded then)."""
        ...

    def emit(self, name: EventName, **data: Any) -> None:
        """Tell the turn's listener that ``name`` happened."""
        ...


class TurnEvents:
    """The events of one turn, in order: filled by :meth:`emit`, read by the channel."""

    listened = True

    def __init__(self) -> None:
        self._queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        #: events of :data:`HELD` not yet given to the channel, and the timer that gives them
        self._held: deque[TurnEvent] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def emit(self, name: EventName, **data: Any) -> None:
        """Tell the turn's listener that ``name`` happened: at once, or for an event of
        :data:`HELD` within :data:`PROGRESS_BATCH` seconds (module docstring)."""
        if name in HELD:
            self._held.append(TurnEvent(name, data))
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(PROGRESS_BATCH, self._release)
            return
        self._release()
        self._queue.put_nowait(TurnEvent(name, data))

    def _release(self) -> None:
        """Give the channel the events held, in order."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._held:
            self._queue.put_nowait(self._held.popleft())

    @property
    def queued(self) -> bool:
        """Whether more events are already waiting to be read."""
        return not self._queue.empty()

    def start(self, work: Awaitable[T]) -> asyncio.Task[T]:
        """Run ``work`` (the flow's answer to a message carrying this object) as a task;
        the events end with it."""

        async def run() -> T:
            try:
                return await work
            finally:
                self._release()
                self._queue.put_nowait(None)

        return asyncio.create_task(run())

    async def __aiter__(self) -> AsyncIterator[TurnEvent]:
        """The events until the work started by :meth:`start` ends."""
        while (event := await self._queue.get()) is not None:
            yield event

    async def first(self) -> TurnEvent | None:
        """The next event, or None when the work ended without one more (iterating
        afterwards then ends at once)."""
        event = await self._queue.get()
        if event is None:
            self._queue.put_nowait(None)
        return event


class _Unheard:
    """The listener of a turn nobody follows: each event is dropped as it is told."""

    listened = False

    def emit(self, name: EventName, **data: Any) -> None:
        return None


#: What a turn nobody follows reports to (a JSON client, a bot channel, a replay).
UNHEARD: TurnListener = _Unheard()
