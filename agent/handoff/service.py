"""Handing a dialog to a person and back (docs/handoff.md): what the operator routes, the
API and the message flow ask for, on the store's conditional writes.

What stores an utterance (asking for a person through the API, an operator's message, a
handback, the agent taking an unclaimed dialog back) runs in the user's queue
(:mod:`agent.queues`), as a turn does, on any replica: it is ordered with the user's
messages, and the handoff's state it checks cannot change under it. A claim stores no
utterance and is one conditional write. Every step made in this process wakes the
dialog's followers here (:class:`~agent.handoff.notices.Notices`); those of other
replicas find it on their next look at the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

from agent.handoff.errors import NO_SECTION, HandoffConflict, HandoffOff, NotHandedOff
from agent.handoff.notices import Notices
from agent.handoff.webhook import Webhook
from agent.metrics import Metrics
from agent.queues import QueueTimeout, UserQueues
from agent.state.handoff import (
    HANDOFF_SKILL,
    OPERATOR_SKILL,
    Handoff,
    HandoffStatus,
    ReturnedBy,
)
from agent.state.models import BotUtterance, Dialog, HumanUtterance, Utterance, utc_now
from agent.store.base import DialogReader, HandoffStore, StoreUnavailable
from agent.turn.config import HandoffConfig

log = logging.getLogger("chorus.handoff")

#: Seconds between two looks at the store of a follower of a handed-off dialog (a user's
#: channel, an operator's live view): how late a message written on another replica
#: arrives. A write in this process wakes its followers at once.
FOLLOW_POLL = 0.5
#: Seconds between two looks for dialogs no one claimed in time.
UNCLAIMED_POLL = 5.0
#: Handoffs the look for unclaimed dialogs takes back per pass.
UNCLAIMED_BATCH = 100
#: Utterances read per look of a follower.
FOLLOW_BATCH = 100
#: How many of a dialog's last utterances an operator's message_id is looked for in.
KEY_LOOKBACK = 50


@dataclass(frozen=True, slots=True)
class Followed:
    """What a follower of a dialog learns in one look: the utterances stored since the
    last one, and the handoff when it changed."""

    utterances: list[Utterance]
    handoff: Handoff | None


class Handoffs:
    """Handoffs of dialogs to people; see the module docstring."""

    def __init__(
        self,
        store: HandoffStore,
        reader: DialogReader,
        queues: UserQueues,
        config: HandoffConfig | None,
        metrics: Metrics,
        *,
        webhook: Webhook | None = None,
        notices: Notices | None = None,
        follow_poll: float = FOLLOW_POLL,
        unclaimed_poll: float = UNCLAIMED_POLL,
        off_because: str = NO_SECTION,
    ) -> None:
        self._store = store
        self._reader = reader
        self._off_because = off_because
        self._queues = queues
        self.config = config
        self._metrics = metrics
        self._webhook = webhook
        self.notices = notices or Notices()
        self._follow_poll = follow_poll
        self._unclaimed_poll = unclaimed_poll
        self._task: asyncio.Task[None] | None = None

    @property
    def on(self) -> bool:
        """Whether dialogs may be handed to people (the pipeline file has ``handoff``)."""
        return self.config is not None

    def _config(self) -> HandoffConfig:
        if self.config is None:
            raise HandoffOff(self._off_because)
        return self.config

    # --- the message flow's part, inside the user's queue -------------------------------

    async def active(self, dialog_id: str) -> Handoff | None:
        """The dialog's handoff when it is waiting or held (the bot stays silent); None
        otherwise, and without reading the store when handoffs are off."""
        if self.config is None:
            return None
        handoff = await self._store.handoff(dialog_id)
        return handoff if handoff is not None and handoff.active else None

    async def requested(
        self, dialog_id: str, user_id: str, *, by: str, reason: str, history: list[Utterance]
    ) -> Handoff | None:
        """Record that a turn asked for a person (``by``: ``skill:<name>`` or
        ``rule:<pattern>``); the handoff, or None when one was active already. Called in
        the user's queue, before the turn's end is stored."""
        handoff = await self._store.request_handoff(_waiting(dialog_id, user_id, reason, by))
        if handoff is not None:
            self._metrics.handoffs.labels(by.split(":", 1)[0]).inc()
            self._announce("handoff.requested", handoff, history=history)
        return handoff

    async def append_utterance(
        self, dialog_id: str, user_id: str, utterance: HumanUtterance
    ) -> None:
        """Store a message of the user unanswered, for the person the dialog is with (the
        flow calls :meth:`kept` once it is noted in the queue)."""
        await self._store.append_utterance(dialog_id, user_id, utterance)

    def kept(self, handoff: Handoff, utterance: HumanUtterance) -> None:
        """A message of the user was stored, unanswered, while ``handoff`` is active."""
        self.notices.notify(handoff.dialog_id)
        self._announce("handoff.message", handoff, utterance=utterance)

    def _announce(
        self,
        event: str,
        handoff: Handoff,
        *,
        utterance: Utterance | None = None,
        history: list[Utterance] | None = None,
    ) -> None:
        if self._webhook is not None:
            self._webhook.send(event, handoff, utterance=utterance, history=history)  # type: ignore[arg-type]

    # --- the API's and the operators' part ----------------------------------------------

    async def _open_dialog(self, dialog_id: str) -> Dialog:
        dialog = await self._reader.dialog(dialog_id)
        if dialog is None or dialog.date_finish is not None:
            raise NotHandedOff(dialog_id)
        return dialog

    async def request(self, dialog_id: str, reason: str) -> Handoff:
        """Hand an open dialog to a person through the API: the user is told so in the
        pipeline's words (a bot utterance of :data:`HANDOFF_SKILL`)."""
        config = self._config()
        dialog = await self._open_dialog(dialog_id)
        user_id = dialog.human.user_external_id
        async with self._queues.turn(user_id):
            handoff = await self._store.request_handoff(_waiting(dialog_id, user_id, reason, "api"))
            if handoff is None:
                raise HandoffConflict(f"dialog {dialog_id} is handed to a person already")
            await self._store.append_utterance(
                dialog_id,
                user_id,
                BotUtterance(text=config.announce, active_skill=HANDOFF_SKILL, confidence=1.0),
            )
        self._metrics.handoffs.labels("api").inc()
        self.notices.notify(dialog_id)
        self._announce("handoff.requested", handoff, history=dialog.utterances)
        return handoff

    async def current(self, dialog_id: str) -> Handoff:
        """The dialog's handoff while it is waiting or held; :class:`NotHandedOff` else: an
        operator sees nothing of a dialog that is with the bot."""
        self._config()
        handoff = await self._store.handoff(dialog_id)
        if handoff is None or not handoff.active:
            raise NotHandedOff(dialog_id)
        return handoff

    async def current_or_none(self, dialog_id: str) -> Handoff | None:
        """The dialog's latest handoff, in any state (None: never handed off)."""
        return await self._store.handoff(dialog_id)

    async def inbox(self, *, limit: int) -> list[Handoff]:
        """The dialogs waiting for a person (the longest waiting first), then those held."""
        self._config()
        return await self._store.handoffs(("waiting", "held"), limit=limit)

    async def claim(self, dialog_id: str, operator: str) -> Handoff:
        """Give a waiting dialog to ``operator``; claiming one's own again is a no-op, one
        held by another is :class:`HandoffConflict`."""
        self._config()
        now = utc_now()
        handoff = await self._store.claim_handoff(dialog_id, operator, now)
        if handoff is None:
            current = await self.current(dialog_id)
            if current.state == "held" and current.operator == operator:
                return current
            raise HandoffConflict(
                f"dialog {dialog_id} is held by {current.operator} since "
                f"{current.since.isoformat()}"
            )
        self._metrics.handoff_claim_seconds.observe((now - handoff.requested_at).total_seconds())
        self.notices.notify(dialog_id)
        self._announce("handoff.claimed", handoff)
        return handoff

    def _held_by(self, handoff: Handoff, operator: str) -> None:
        if handoff.state != "held" or handoff.operator != operator:
            holder = f"held by {handoff.operator}" if handoff.state == "held" else handoff.state
            raise HandoffConflict(
                f"dialog {handoff.dialog_id} is {holder}, not held by {operator}: claim it first"
            )

    async def write(
        self, dialog_id: str, operator: str, text: str, message_id: str | None = None
    ) -> BotUtterance:
        """Store what ``operator``, who holds the dialog, says to the user: a bot utterance
        marked with them. With ``message_id``, a message sent again is stored once and
        the stored one returned."""
        handoff = await self.current(dialog_id)
        self._held_by(handoff, operator)
        key = None if message_id is None else f"operator:{message_id}"
        async with self._queues.turn(handoff.user_id):
            handoff = await self.current(dialog_id)
            self._held_by(handoff, operator)
            if key is not None:
                earlier = await self._keyed(dialog_id, key)
                if earlier is not None:
                    return earlier
            utterance = BotUtterance(
                text=text,
                active_skill=OPERATOR_SKILL,
                confidence=1.0,
                operator=operator,
                attributes={"message_key": key} if key is not None else {},
            )
            await self._store.append_utterance(dialog_id, handoff.user_id, utterance)
        self.notices.notify(dialog_id)
        return utterance

    async def _keyed(self, dialog_id: str, key: str) -> BotUtterance | None:
        """The operator's message stored under ``key`` among the dialog's last ones."""
        dialog = await self._reader.dialog(dialog_id)
        for utterance in reversed((dialog.utterances if dialog else [])[-KEY_LOOKBACK:]):
            if (
                isinstance(utterance, BotUtterance)
                and utterance.attributes.get("message_key") == key
            ):
                return utterance
        return None

    async def hand_back(self, dialog_id: str, operator: str | None, by: ReturnedBy) -> Handoff:
        """Give the dialog back to the bot: by the operator who holds it (or who declines a
        waiting one), or through the API (``operator`` None)."""
        handoff = await self.current(dialog_id)
        async with self._queues.turn(handoff.user_id):
            now = utc_now()
            returned = await self._store.return_handoff(dialog_id, by, now, operator=operator)
            if returned is None:
                current = await self.current(dialog_id)
                self._held_by(current, operator or "")
                raise HandoffConflict(f"dialog {dialog_id} changed meanwhile; try again")
        self._returned(returned, by)
        return returned

    async def dialog_closed(self, dialog_id: str) -> None:
        """The user closed the dialog: a person waiting for or holding it has nothing left
        to answer, so its handoff ends (returned ``closed``)."""
        if self.config is None:
            return
        returned = await self._store.return_handoff(dialog_id, "closed", utc_now())
        if returned is not None:
            self._returned(returned, "closed")

    def _returned(self, handoff: Handoff, by: ReturnedBy) -> None:
        self._metrics.handoff_returns.labels(by).inc()
        if handoff.claimed_at is not None and handoff.returned_at is not None:
            self._metrics.handoff_held_seconds.observe(
                (handoff.returned_at - handoff.claimed_at).total_seconds()
            )
        self.notices.notify(handoff.dialog_id)
        self._announce("handoff.returned", handoff)

    # --- following a dialog ---------------------------------------------------------------

    async def follow(
        self, dialog_id: str, after: str | None, known: HandoffStatus | None
    ) -> AsyncIterator[Followed]:
        """The dialog's utterances stored after ``after``, and each change of its handoff
        (``known``: where the caller last saw it stand), as they come, until the dialog
        is returned to the bot (that change is the last)."""
        last = after
        while True:
            utterances = await self._store.utterances_after(dialog_id, last, limit=FOLLOW_BATCH)
            current = await self._store.handoff(dialog_id)
            status = None if current is None else current.status()
            changed = current if status != known else None
            if utterances or changed is not None:
                yield Followed(utterances or [], changed)
            if utterances:
                last = utterances[-1].utt_id
            known = status
            if current is None or not current.active:
                return
            if utterances and len(utterances) == FOLLOW_BATCH:
                continue
            await self.notices.wait(dialog_id, self._follow_poll)

    # --- taking back dialogs no one claimed -------------------------------------------------

    def start(self) -> None:
        """Start looking for dialogs no one claimed in time (when handoffs are on)."""
        if self.config is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._take_back_forever(), name="chorus-handoff-unclaimed"
            )

    async def _take_back_forever(self) -> None:
        while True:
            try:
                await self.take_back_unclaimed()
            except (StoreUnavailable, QueueTimeout):  # the next look tries again
                log.warning("could not look for unclaimed handoffs", exc_info=True)
            except Exception:  # a bug: logged, and the look goes on
                log.exception("the look for unclaimed handoffs failed")
            await asyncio.sleep(self._unclaimed_poll)  # pacing a background task

    async def take_back_unclaimed(self) -> int:
        """Return to the bot each dialog waiting longer than ``unclaimed_after``, telling
        the user so; how many were. Safe on every replica at once: each dialog's return
        is a conditional write, and only the agent whose write won tells the user."""
        config = self._config()
        cutoff = utc_now() - timedelta(seconds=config.unclaimed_after)
        taken = 0
        for handoff in await self._store.handoffs(
            ("waiting",), limit=UNCLAIMED_BATCH, requested_before=cutoff
        ):
            async with self._queues.turn(handoff.user_id):
                returned = await self._store.return_handoff(
                    handoff.dialog_id,
                    "timeout",
                    utc_now(),
                    states=("waiting",),
                    requested_before=cutoff,
                )
                if returned is None:
                    continue
                await self._store.append_utterance(
                    handoff.dialog_id,
                    handoff.user_id,
                    BotUtterance(
                        text=config.taken_back, active_skill=HANDOFF_SKILL, confidence=1.0
                    ),
                )
            taken += 1
            self._returned(returned, "timeout")
        return taken

    async def aclose(self) -> None:
        """Stop looking for unclaimed dialogs (the lifespan's end)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _waiting(dialog_id: str, user_id: str, reason: str, by: str) -> Handoff:
    """A handoff asked for now by ``by`` (``skill:<name>``, ``rule:<pattern>`` or ``api``),
    waiting for a person."""
    return Handoff(
        dialog_id=dialog_id,
        user_id=user_id,
        state="waiting",
        reason=reason,
        requested_by=by,
        requested_at=utc_now(),
    )
