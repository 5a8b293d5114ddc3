"""Turn events: what a client following a turn live is told while it runs.

A turn's code does not know whether anyone is listening, and should not have to: the
message flow, both executors and the service calls report what happens through
:func:`emit`, which costs one context-variable read when nobody listens. A channel that
wants the events (Server-Sent Events, the WebSocket chat, a bot channel) runs the turn
inside :meth:`TurnEvents.listen` and reads them from the same object, in order.

The events, by name (docs/api.md has the wire form):

- ``accepted``: the human utterance is stored (``dialog_id``, ``utt_id``);
- ``progress``: one service's call ended (``service``, ``role``, ``outcome``, and in a
  dp-agent pipeline ``dream_group`` when its service has one);
- ``token``: a piece of the answer's text, from a skill whose answer is certain to be
  chosen (``text``, ``skill``);
- ``answer`` / ``error``: the channel's own last event, the reply or the failure.

The context variable is copied into every task the turn starts, so events from a service
call running in the executor's task group reach the listener of the turn that started it,
and never another turn's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

#: An event's name: the ``event:`` field of Server-Sent Events, ``event`` in ``/chat/ws``.
EventName = Literal["accepted", "progress", "token", "answer", "error"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """One event: its name and its JSON-ready data."""

    name: EventName
    data: dict[str, Any]


_listener: ContextVar[TurnEvents | None] = ContextVar("chorus_turn_events", default=None)


def emit(name: EventName, **data: Any) -> None:
    """Tell the turn's listener, if it has one, that ``name`` happened."""
    listener = _listener.get()
    if listener is not None:
        listener.put(TurnEvent(name, data))


def listening() -> bool:
    """Whether the running turn has a listener (a skill's tokens are forwarded then)."""
    return _listener.get() is not None


class TurnEvents:
    """The events of one turn, in order: filled by :func:`emit`, read by the channel."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()

    def put(self, event: TurnEvent) -> None:
        self._queue.put_nowait(event)

    @property
    def queued(self) -> bool:
        """Whether more events are already waiting to be read."""
        return not self._queue.empty()

    @contextmanager
    def listen(self) -> Iterator[None]:
        """Run the block (and the tasks it starts) with this object as its listener."""
        token = _listener.set(self)
        try:
            yield
        finally:
            _listener.reset(token)

    def start(self, work: Awaitable[T]) -> asyncio.Task[T]:
        """Run ``work`` as a task listened to by this object; the events end with it."""

        async def run() -> T:
            with self.listen():
                try:
                    return await work
                finally:
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
