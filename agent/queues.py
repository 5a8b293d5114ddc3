"""One message of a user at a time, in arrival order, across every agent replica.

Two messages of one user that overlap would read the same history and attributes and
interleave their utterances (human, human, bot, bot), and one attribute update would
overwrite the other. So each message takes a numbered place in the user's queue in the
store (:meth:`QueueStore.take_place`) and starts its turn only when every earlier place is
done.

A message that arrives while an earlier one of its user is being answered follows the
pipeline's (or its request's) policy (:data:`DoubleTexting`): ``enqueue`` waits its turn;
``reject`` gives its place back at once and is refused (:class:`TurnRunning`), naming the
running turn's utterance; ``interrupt`` asks the running turn to stop through the store
(:meth:`QueueStore.interrupt`) and then waits its turn. The agent serving that turn
notices at once when it is this one; another replica looks every :data:`INTERRUPT_POLL`
at its turns older than :data:`INTERRUPT_GRACE`. It cancels the pipeline and raises
:class:`TurnInterrupted`.

The queue lives in the database, not in this process, so replicas sharing one MongoDB
see the same queue. What this process keeps is only a wake-up hint (a message finished
here, so its successor waiting here need not wait for its next poll) and the places it
holds, whose leases a heartbeat renews: a place whose agent died (SIGKILL, a lost
machine) stops being renewed, and the next message gives it up once its lease runs out.
An agent that only stalled that long finds, at its turn's end, that its place was passed
over: the store refuses the end (:class:`~agent.store.base.PlaceLost`, checked in the
same write) and the flow raises :class:`TurnOvertaken` (503, retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime
from typing import Any, TypeVar

from agent.leases import Heartbeat
from agent.sdk.errors import ChorusError
from agent.state.models import utc_now
from agent.store.base import Place, QueueStore, RunningTurn, StoreUnavailable
from agent.turn.config import DoubleTexting

log = logging.getLogger("chorus.queues")
T = TypeVar("T")

#: Polling interval for a place that waits on another replica: it starts short (a turn is
#: milliseconds) and backs off, so a long wait costs few queries.
_FIRST_POLL = 0.005
_MAX_POLL = 0.1
#: Seconds between two looks at the store for interrupts of the turns this agent serves
#: (one query for all of them, only while it serves one): how long a turn interrupted
#: from another replica may go on.
INTERRUPT_POLL = 0.1
#: Seconds a turn runs before the store is asked whether another replica interrupted it:
#: a turn shorter than that ends about as soon as it could be stopped, and costs no query
#: (a steady-state turn's commands stay as docs/storage.md counts them). An interrupt
#: from this agent stops it at once.
INTERRUPT_GRACE = 0.5
#: Seconds a refused message waits for the running turn to name its utterance (it does so
#: right after storing it, milliseconds after taking its place).
_NAME_WAIT = 2.0

#: Seconds a message waits for the same user's earlier messages before it gets a 503.
QUEUE_WAIT = 60.0


class QueueTimeout(ChorusError):
    """The user's earlier messages did not finish within the wait limit."""

    def __init__(self, waited: float) -> None:
        super().__init__(
            f"earlier messages of this user are still being answered after "
            f"{waited:.0f}s; retry shortly"
        )
        self.waited = waited


class TurnRunning(ChorusError):
    """A message refused because an earlier one of its user is being answered (policy
    ``reject``)."""

    def __init__(self, utt_id: str | None) -> None:
        super().__init__(
            f"a message of this user is being answered (utterance {utt_id}); send this one "
            "after its answer, or with double_texting=enqueue or interrupt"
        )
        self.utt_id = utt_id


class TurnInterrupted(ChorusError):
    """The turn was cancelled by a later message of its user (policy ``interrupt``): its
    human utterance is kept, marked interrupted, without an answer."""

    def __init__(self, utt_id: str | None) -> None:
        super().__init__(
            f"this message (utterance {utt_id}) was interrupted by a later message of the "
            "same user, which is answered instead"
        )
        self.utt_id = utt_id


class TurnOvertaken(ChorusError):
    """The turn lost its place in the queue while it ran: its agent stalled past the
    lease (``CHORUS_QUEUE_LEASE``) and the user's next message took the queue over, so
    nothing of its answer was stored (:class:`~agent.store.base.PlaceLost`).

    Why the client is told to send the message again (503 with Retry-After) instead of
    the turn being redone here: the turn that took over may already have answered on
    the state this one read, and redoing it on an agent that has just stalled for a
    whole lease would call every service a second time, with the same risk of stalling
    again, while the client waits without knowing. A 503 is what a client of this API
    already retries (as for a full queue), and the retry is safe: the human utterance
    stays in the dialog marked ``interrupted``, without its idempotency key, so the
    message sent again (with its key or without) is stored once more and answered on
    the state as it is then."""

    def __init__(self, utt_id: str) -> None:
        super().__init__(
            f"this message (utterance {utt_id}) lost its place in the user's queue while "
            "it was answered (the agent was too slow to renew it) and the user's next "
            "message went first; nothing of the answer was stored: send it again"
        )
        self.utt_id = utt_id


class _Stop:
    """The request to stop a place's turn (an interrupt): set once, by this agent's next
    message of the user or by the watcher that saw another replica's. Setting it cancels
    the task running the turn's pipeline, as ``asyncio.timeout`` cancels its task, so
    that no task and no waiter is made to watch for it on every turn."""

    __slots__ = ("_set", "cancelled", "task")

    def __init__(self) -> None:
        self._set = False
        #: the task running the turn's pipeline (:meth:`UserQueues.interruptible`)
        self.task: asyncio.Task[object] | None = None
        #: whether setting it cancelled that task
        self.cancelled = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        if self.task is not None and not self.cancelled:
            self.cancelled = True
            self.task.cancel()


class UserQueues:
    """Serialises each user's turns through the store; see the module docstring."""

    def __init__(
        self, store: QueueStore, *, lease: float = 10.0, max_wait: float = QUEUE_WAIT
    ) -> None:
        self._store = store
        self._max_wait = max_wait
        self._heartbeat: Heartbeat[tuple[str, int]] = Heartbeat(lease, self._renew, "queue")
        self._finished: dict[str, asyncio.Event] = {}
        #: the places this agent serves, each with what interrupts its turn
        self._serving: dict[tuple[str, int], _Stop] = {}
        #: when each of them started being served (the event loop's clock)
        self._since: dict[tuple[str, int], float] = {}
        self._watcher: asyncio.Task[None] | None = None

    async def _renew(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        await self._store.renew_places(sorted(places), lease_until)

    @contextlib.asynccontextmanager
    async def turn(self, user_id: str, policy: DoubleTexting = "enqueue") -> AsyncIterator[Place]:
        """Wait for the user's earlier messages (or, by ``policy``, refuse to, or interrupt
        the running one first), then hold the head of the queue until the block ends. The place is
        yielded so that the turn's last write can leave the queue too
        (:meth:`TurnStore.finish_turn`); otherwise it is left here."""
        held = self._heartbeat.held
        self._heartbeat.start()
        place = await self._store.take_place(user_id, self._heartbeat.lease_end())
        holding = (user_id, place.number)
        held.add(holding)
        served = False
        try:
            if not place.first:
                if policy != "enqueue":
                    await self._before_waiting(place, policy)
                await self._wait(place)
            served = True
            self._serving[holding] = _Stop()
            self._since[holding] = asyncio.get_running_loop().time()
            self._watch()
            yield place
        finally:
            self._serving.pop(holding, None)
            self._since.pop(holding, None)
            held.discard(holding)
            # Shielded: a cancelled request (client gone, shutdown) must still free the
            # queue; if the store is down, the lease runs out and frees it instead.
            if not place.left:
                with contextlib.suppress(StoreUnavailable):
                    await asyncio.shield(self._store.leave(place, served=served))
            event = self._finished.pop(user_id, None)
            if event is not None:
                event.set()

    async def _before_waiting(self, place: Place, policy: DoubleTexting) -> None:
        """``reject``: refuse the message while another of its user runs; ``interrupt``:
        ask the running turn to stop. Nothing when the queue moved on meanwhile."""
        running = await self._running(place)
        if running is None:
            return
        if policy == "reject":
            raise TurnRunning(running.utt_id)
        local = self._serving.get((place.user_id, running.number))
        if local is not None:
            local.set()
        await self._store.interrupt(place.user_id, running.number)

    async def _running(self, place: Place) -> RunningTurn | None:
        """The turn being served before ``place``, once it has named its utterance (or
        after :data:`_NAME_WAIT`, unnamed)."""
        loop = asyncio.get_running_loop()
        deadline, poll = loop.time() + _NAME_WAIT, _FIRST_POLL
        while True:
            running = await self._store.running_turn(place.user_id)
            if running is None or running.number >= place.number:
                return None
            if running.utt_id is not None or loop.time() > deadline:
                return running
            await asyncio.sleep(poll)  # polling the store: the other turn may be elsewhere
            poll = min(poll * 2, _MAX_POLL)

    async def note(self, place: Place, utt_id: str) -> None:
        """Record the utterance the place answers, for a message refused or interrupting."""
        await self._store.note_turn(place, utt_id)

    async def interruptible(self, place: Place, work: Coroutine[Any, Any, T]) -> T:
        """``work`` (the pipeline), cancelled when a later message interrupts the place's
        turn: :class:`TurnInterrupted` is raised then. It runs in the caller's task, which
        the interrupt cancels (:class:`_Stop`) and, once ``work`` has stopped, uncancels,
        as ``asyncio.timeout`` does; a cancellation from anywhere else goes on up."""
        stop = self._serving.get((place.user_id, place.number))
        if stop is None:
            return await work
        if stop.is_set():  # interrupted before it started
            work.close()
            raise TurnInterrupted(None)
        task = asyncio.current_task()
        assert task is not None
        stop.task = task
        try:
            done = await work
        except asyncio.CancelledError:
            if stop.cancelled and task.uncancel() == 0:
                raise TurnInterrupted(None) from None
            raise
        finally:
            stop.task = None
        if stop.cancelled:  # the interrupt came as the work ended, which kept its answer
            task.uncancel()
        return done

    def _watch(self) -> None:
        """Start the interrupt watcher if it is not running (it stops when idle)."""
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(
                self._watch_interrupts(), name="chorus-queue-interrupts"
            )

    async def _watch_interrupts(self) -> None:
        loop = asyncio.get_running_loop()
        while self._serving:
            await asyncio.sleep(INTERRUPT_POLL)  # polling the store: interrupts come from anywhere
            old_enough = loop.time() - INTERRUPT_GRACE
            serving = [
                p
                for p, event in self._serving.items()
                if not event.is_set() and self._since.get(p, old_enough) <= old_enough
            ]
            if not serving:
                continue
            try:
                flagged = await self._store.interrupted(serving)
            except StoreUnavailable:  # the next look tries again
                log.warning("could not look for interrupted turns", exc_info=True)
                continue
            for holding in flagged:
                event = self._serving.get(holding)
                if event is not None:
                    event.set()

    async def _wait(self, place: Place) -> None:
        loop = asyncio.get_running_loop()
        started, poll = loop.time(), _FIRST_POLL
        while not await self._store.first_in_queue(place, utc_now()):
            waited = loop.time() - started
            if waited > self._max_wait:
                raise QueueTimeout(waited)
            event = self._finished.setdefault(place.user_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), poll)
            poll = min(poll * 2, _MAX_POLL)

    async def aclose(self) -> None:
        """Stop the heartbeat and the interrupt watcher (the lifespan's end)."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        await self._heartbeat.aclose()
