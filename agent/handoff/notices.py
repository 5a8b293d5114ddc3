"""Wake-ups for whoever follows a handed-off dialog in this process.

An operator's message may be written on any agent replica, and the user's WebSocket may be
held by another, so a follower reads the store (:meth:`Notices.wait` returns after at most
its poll); a write made in this process wakes this process's followers at once, as a
finished turn wakes the next message of its user in :mod:`agent.queues`.
"""

from __future__ import annotations

import asyncio
import contextlib


class Notices:
    """One event per followed dialog, set when something of it was written here."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    def notify(self, dialog_id: str) -> None:
        """Something of the dialog was written: wake its followers."""
        for event in self._events.get(dialog_id, ()):
            event.set()

    async def wait(self, dialog_id: str, poll: float) -> None:
        """Return when the dialog is written to in this process, or after ``poll`` seconds."""
        event = asyncio.Event()
        waiting = self._events.setdefault(dialog_id, set())
        waiting.add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), poll)
        finally:
            waiting.discard(event)
            if not waiting:
                self._events.pop(dialog_id, None)
