"""An event loop whose clock a test moves forward, so that what waits on a timer (a turn's
deadline, a call's timeout) sees the time pass at once, and in order, without the test
waiting for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class TravellingLoop(asyncio.SelectorEventLoop):
    """``time()`` is the monotonic clock plus the seconds travelled so far."""

    def __init__(self) -> None:
        super().__init__()
        self._ahead = 0.0

    def time(self) -> float:
        return super().time() + self._ahead

    def travel(self, seconds: float, then: Callable[[], None]) -> None:
        """From any thread: move the clock ``seconds`` forward, and call ``then`` after
        every timer that the move made due has fired (the loop runs due timers in the order
        of their times, and ``then`` is due at the new time, after all of them)."""

        def jump() -> None:
            self._ahead += seconds
            self.call_at(self.time(), then)

        self.call_soon_threadsafe(jump)
