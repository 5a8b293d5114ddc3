"""The message flow: a user's message taken from arrival to answer (:class:`MessageFlow`),
the work behind the chat endpoints. :meth:`MessageFlow.reply` reads top to bottom: claim
the idempotency key, take the user's place in the queue, run the turn, record the answer.

The human utterance is stored before any service is called, and everything the pipeline
made of it is written in one step at the end, together with leaving the queue, so a message
is never lost. Two mechanisms make a sent-again message cost nothing, each answering its
own question:

* the key's claim (:mod:`agent.idempotency`): may this request be answered now, and was it
  answered already? It records where the answer is (:meth:`Answer.record`);
* the key kept on the stored utterance (``message_key``): where in the dialog did an
  attempt leave this message? It finds the answer a claim points to, and what an
  unfinished attempt stored (its utterance, answered again instead of stored twice; or
  its whole turn, sent back). Without a key, a retry is the same text and attributes
  within :data:`RETRY_WINDOW`, answered again only when the last turn's end is known to
  have been in doubt: the store completed it, or this agent told its client 503 while
  its write may have been applied (:class:`EndsInDoubt`).

A turn is started (the dialog opened, the utterance stored), answered (one
:class:`~agent.turn.value.Turn` handed to the one executor, one
:class:`~agent.turn.value.TurnResult` back; with an experiment the executor is the arms'
chooser, :mod:`agent.turn.arms`, and the flow knows no more of it than the arm stored on
the dialog) and finished (the answer stored). A finished turn the database refuses for its
content is stored without the services' outputs, the refusal among its errors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agent.handoff import HandoffConflict, Handoffs
from agent.idempotency import IdempotencyKeys, KeyClaim, KeyForgotten, KeySuperseded
from agent.metrics import Metrics
from agent.queues import TurnInterrupted, TurnOvertaken, UserQueues
from agent.state.handoff import HANDOFF_SKILL, Handoff
from agent.state.models import (
    FALLBACK_SKILL,
    BotUtterance,
    HumanUtterance,
    Utterance,
    utc_now,
)
from agent.store.base import (
    Place,
    PlaceLost,
    RatingStore,
    StoreUnavailable,
    StoreWriteRefused,
    TurnEnd,
    TurnStart,
    TurnStore,
)
from agent.telemetry import Telemetry, printable, turn_answered, turn_identified
from agent.telemetry.turn_events import UNHEARD, TurnListener
from agent.turn.base import TurnExecutor
from agent.turn.config import HANDOFF_FIELD, DoubleTexting
from agent.turn.value import Turn, TurnResult

#: Seconds during which a message sent again after an unanswered attempt (a 503, a dead
#: agent) answers that attempt instead of being stored twice.
RETRY_WINDOW = 300.0
#: Seconds during which a turn's end that the database going away cut short is written again
#: (completing what it stored, never twice) before the client gets 503.
END_RETRY = 10.0

log = logging.getLogger("chorus.flow")

#: Turns whose end this agent may have stored while it told their client 503, kept at most
#: (the oldest forgotten first; see :class:`EndsInDoubt`).
IN_DOUBT_KEPT = 4096

#: Payloads that end the user's open dialog instead of being answered (as in dp-agent).
CLOSING_COMMANDS = frozenset({"/start", "/close"})


@dataclass(frozen=True, slots=True)
class Incoming:
    """One message as a chat endpoint received it, checked: what :meth:`MessageFlow.reply`
    answers."""

    user_id: str
    text: str
    attributes: dict[str, Any] = field(default_factory=dict)
    #: the client's idempotency key, prefixed with the route's name (``chat:``); None: none
    key: str | None = None
    #: the :func:`~agent.idempotency.fingerprint` of the request: a retry of ``key`` must
    #: repeat it
    fingerprint: str = ""
    #: rates the previous bot answer
    reward: float | None = None
    #: end the dialog once this answer is stored (ParlAI's ``episode_done``)
    close_after: bool = False
    #: ``/start`` and ``/close`` end the open dialog instead of being answered (dp-agent)
    closing_commands: bool = False
    #: what this message does while another of the user's is answered; None: the pipeline's
    double_texting: DoubleTexting | None = None
    #: who follows the turn live (a channel's ``TurnEvents``; ``UNHEARD``: nobody): the flow
    #: tells it ``accepted`` and hands it to the executor in the :class:`Turn`
    events: TurnListener = field(default=UNHEARD, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.key is not None and not self.fingerprint:
            raise ValueError(
                f"message {self.key!r}: a keyed message needs the fingerprint of its request"
            )

    @property
    def closes(self) -> bool:
        """Whether the message is a closing command."""
        return self.closing_commands and self.text.strip() in CLOSING_COMMANDS


@dataclass(frozen=True, slots=True)
class Answer:
    """What the flow made of a message, for a route to shape into its reply."""

    dialog_id: str | None
    #: the turn; None when the message was a closing command, or was kept unanswered
    result: TurnResult | None
    #: the dialog's handoff, when this message asked for a person or came while one is
    #: waited for or holds the dialog (docs/handoff.md)
    handoff: Handoff | None = None
    #: the id of the human utterance stored unanswered because the dialog is with a person
    kept: str | None = None

    def record(self) -> dict[str, Any]:
        """What a key's claim keeps of the answer: where it is stored, not a copy. The
        same two fields as every chat reply, so a claim recorded with the whole reply
        is read the same way (and ``kept`` for a message the bot did not answer)."""
        bot = None if self.result is None else self.result.bot_utterance.utt_id
        recorded: dict[str, Any] = {"dialog_id": self.dialog_id, "utt_id": bot}
        if self.kept is not None:
            recorded["kept"] = self.kept
        return recorded

    def debug(self) -> dict[str, Any]:
        """The turn's hypotheses and annotations, for dp-agent's ``debug_output``."""
        if self.result is None:
            return {}
        utterance = self.result.utterance
        return {
            "hypotheses": [h.model_dump(mode="json") for h in utterance.hypotheses],
            "annotations": dict(utterance.annotations),
        }


def _asked_for_person(result: TurnResult, rule: str | None) -> tuple[str, str] | None:
    """What asked for a person in this turn and why, as ``(requested_by, reason)``: the
    pipeline's rule ``rule``, or the chosen hypothesis' ``handoff`` field (``true``, or
    the skill's reason as text); None when nothing did."""
    if rule is not None:
        return f"rule:{rule}", f"the message matched {rule!r}"
    if result.chosen is None or result.chosen >= len(result.utterance.hypotheses):
        return None
    chosen = result.utterance.hypotheses[result.chosen]
    asked = (chosen.model_extra or {}).get(HANDOFF_FIELD)
    if not asked:
        return None
    return f"skill:{chosen.skill_name}", asked if isinstance(asked, str) else ""


def stored_turn(human: HumanUtterance, bot: BotUtterance) -> TurnResult:
    """A turn as the store holds it, to answer again: the chosen hypothesis is the one the
    answer came from (its skill and text), so the answer ranks its alternatives as it
    first did."""
    chosen = next(
        (
            index
            for index, hypothesis in enumerate(human.hypotheses)
            if hypothesis.skill_name == bot.active_skill and hypothesis.text == bot.orig_text
        ),
        None,
    )
    return TurnResult(utterance=human, bot_utterance=bot, chosen=chosen)


#: What a closing command answers.
CLOSED = "The dialog is closed; your next message starts a new one."


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What a turn came to: answered (``result``), or kept unanswered (``kept``) because
    the dialog is with a person; ``handoff``: the dialog's, when it is handed off."""

    dialog_id: str
    arm: str | None
    result: TurnResult | None = None
    kept: HumanUtterance | None = None
    handoff: Handoff | None = None


@dataclass(frozen=True, slots=True)
class InDoubt:
    """A turn in doubt (:class:`EndsInDoubt`)."""

    #: its human utterance's id
    utt_id: str
    #: for a ``close_after`` message whose end was stored and whose close was cut short:
    #: its dialog and its stored turn, sent again if the close landed all the same
    closing: tuple[str, TurnResult] | None = None


class EndsInDoubt:
    """The turns whose end this agent gave up writing (the database stayed away for
    ``END_RETRY``), or whose dialog it failed to close after it (``close_after``), and
    whose client it told 503, by user.

    Why: the write that was cut short may have reached the database before the
    connection died ("the write reached the server, the reply did not"), so the whole
    turn can be stored while its client was told to retry. A keyed retry finds it by its
    key; an unkeyed one is the same text, which the store cannot tell from the user
    saying it again once the turn's end is complete (the store marks only an end it had
    to complete, :attr:`~agent.store.base.TurnStart.completed_last_turn`). The database
    is down when the agent gives up, so nothing can be written there to say so: the agent
    remembers it, and the user's next message that repeats that turn gets its stored
    answer instead of being stored and answered a second time. The next message of the
    user forgets it either way. A retry served by another replica, or after this agent
    restarted, is not recognised: such clients need an idempotency key (docs/turns.md)."""

    def __init__(self, kept: int = IN_DOUBT_KEPT) -> None:
        self._kept = kept
        self._turns: dict[str, InDoubt] = {}

    def add(self, user_id: str, turn: InDoubt) -> None:
        self._turns.pop(user_id, None)
        if len(self._turns) >= self._kept:
            del self._turns[next(iter(self._turns))]
        self._turns[user_id] = turn

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._turns

    def get(self, user_id: str) -> InDoubt | None:
        """The user's turn in doubt, kept."""
        return self._turns.get(user_id)

    def take(self, user_id: str) -> InDoubt | None:
        """The user's turn in doubt, forgotten."""
        return self._turns.pop(user_id, None)


class MessageFlow:
    """Takes one message of a user from claim to reply; see the module docstring."""

    def __init__(
        self,
        store: TurnStore,
        executor: TurnExecutor,
        channel_type: str,
        *,
        ratings: RatingStore,
        queues: UserQueues,
        keys: IdempotencyKeys,
        metrics: Metrics | None = None,
        retry_window: float = RETRY_WINDOW,
        telemetry: Telemetry | None = None,
        end_retry: float = END_RETRY,
        handoffs: Handoffs | None = None,
    ) -> None:
        self._store = store
        self._ratings = ratings
        #: None: dialogs are never handed to a person (as with no handoff in the pipeline)
        self.handoffs = handoffs
        #: the one seam to the pipeline (with an experiment: the arms' chooser)
        self._executor = executor
        self._channel_type = channel_type
        self._retry_window = timedelta(seconds=retry_window)
        self._end_retry = end_retry
        self.metrics = metrics or Metrics()
        self.queues = queues
        self.keys = keys
        self.telemetry = telemetry or Telemetry()
        #: turns whose end may be stored though their client was told 503
        self.in_doubt = EndsInDoubt()

    async def reply(self, incoming: Incoming) -> Answer:
        """The answer to one message, given once per idempotency key: a retry of an
        answered key gets the stored answer and runs nothing."""
        claim = await self.keys.claim(incoming.user_id, incoming.key, incoming.fingerprint)
        if claim.answered is not None:
            return await self._recorded(claim)
        async with self.keys.held(claim):
            if incoming.closes:
                policy = incoming.double_texting or self._executor.pipeline.double_texting
                answer = await self.close(incoming.user_id, policy)
            else:
                outcome = await self._run(incoming, retried=claim.retried)
                answer = Answer(
                    outcome.dialog_id,
                    outcome.result,
                    handoff=outcome.handoff,
                    kept=None if outcome.kept is None else outcome.kept.utt_id,
                )
            await self.keys.complete(claim, answer.record())
        return answer

    async def _recorded(self, claim: KeyClaim) -> Answer:
        """The answer a key's claim recorded (:meth:`Answer.record`), read back from the
        dialog by the key kept on its utterance."""
        assert claim.key is not None and claim.answered is not None
        dialog_id, utt_id = claim.answered.get("dialog_id"), claim.answered.get("utt_id")
        kept = claim.answered.get("kept")
        if kept is not None and dialog_id:  # stored unanswered: the dialog was with a person
            handoffs = self.handoffs
            handoff = None if handoffs is None else await handoffs.current_or_none(dialog_id)
            return Answer(dialog_id, None, handoff=handoff, kept=kept)
        if utt_id is None:  # a closing command
            return Answer(dialog_id, None)
        found = await self._store.keyed_turn(dialog_id, claim.key) if dialog_id else []
        if len(found) == 2:
            human, bot = found
            if isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance):
                return Answer(dialog_id, stored_turn(human, bot))
        raise KeyForgotten(claim.key)

    async def close(self, user_id: str, policy: DoubleTexting = "enqueue") -> Answer:
        """End the user's open dialog, in the user's queue."""
        async with self.queues.turn(user_id, policy):
            closed = await self._store.close_active_dialog(user_id)
            if closed is not None and self.handoffs is not None:
                await self.handoffs.dialog_closed(closed)
        return Answer(closed, None)

    async def run_turn(self, incoming: Incoming) -> tuple[TurnResult, str]:
        """One turn, answered (a caller that knows no handoff: with the dialog handed to a
        person, :class:`~agent.handoff.HandoffConflict`); see :meth:`_run`."""
        outcome = await self._run(incoming)
        if outcome.result is None:
            raise HandoffConflict(f"dialog {outcome.dialog_id} is with a person: not answered")
        return outcome.result, outcome.dialog_id

    async def _run(self, incoming: Incoming, retried: bool = False) -> _Outcome:
        """One turn of ``incoming`` in the user's place in the queue: started (the
        utterance stored), run (the pipeline's answer) and finished (the answer stored);
        ``retried``: an earlier attempt with the message's key did not finish."""
        started = time.perf_counter()
        user_id = incoming.user_id
        # what the message does while another of the user's is answered
        policy = incoming.double_texting or self._executor.pipeline.double_texting
        with self.metrics.in_flight.track_inprogress(), self.telemetry.turn(user_id):
            try:
                async with self.queues.turn(user_id, policy) as place:
                    outcome = await self._turn(incoming, retried, place)
            except PlaceLost as lost:
                self.metrics.overtaken.inc()
                log.warning(
                    "user %s: the turn of %s was passed over in the queue while it ran (its "
                    "lease lapsed); its answer was not stored and its client is told to retry",
                    printable(user_id),
                    lost.utt_id,
                )
                raise TurnOvertaken(lost.utt_id) from None
            result = outcome.result
            if result is None:
                return outcome
            bot = result.bot_utterance
            turn_answered(
                bot.utt_id,
                bot.active_skill,
                "fallback" if bot.active_skill == FALLBACK_SKILL else "answered",
                len(result.utterance.errors),
            )
        self.metrics.observe_turn(result, time.perf_counter() - started, arm=outcome.arm)
        return outcome

    async def _turn(self, incoming: Incoming, retried: bool, place: Place) -> _Outcome:
        """Start, run, finish: what the turn came to."""
        turn = await self._start(incoming, retried, place)
        if isinstance(turn, _Outcome):  # answered before, or kept for a person
            return turn
        # a person asked for in words one of the pipeline's handoff patterns knows
        config = None if self.handoffs is None else self.handoffs.config
        rule = None if config is None else config.matching(incoming.text)
        result = await self._answer(turn, rule, place)
        return await self._finish(incoming, turn, result, rule, place)

    async def _start(self, incoming: Incoming, retried: bool, place: Place) -> Turn | _Outcome:
        """Open the user's dialog and store the message once, however often it is sent:
        the turn to run; or the turn's end at once, when an earlier attempt of the message
        was answered, or the dialog is with a person."""
        closed = await self._answered_before_close(incoming, retried)
        if closed is not None:  # nothing opened: the user's next message opens a dialog
            return await self._resent(incoming, closed[0], None, closed[1], closing=False)
        read = max(self._executor.history_window, 1)
        # a keyed message, or one that may repeat a turn in doubt, reads the last turn
        last_turn = incoming.key is not None or incoming.user_id in self.in_doubt
        start = await self._store.open_turn(
            incoming.user_id,
            self._channel_type,
            max(read, 2) if last_turn else read,
            arm=self._executor.arm_for(incoming.user_id),
            seen=place.seen,
            whole=self._executor.whole_history,
        )
        doubt = self.in_doubt.take(incoming.user_id)
        in_doubt = None if doubt is None else doubt.utt_id
        dialog = start.dialog
        utterance = HumanUtterance(
            text=incoming.text,
            user=start.human.model_dump(mode="json"),
            attributes=incoming.attributes,
            message_key=incoming.key,
        )
        answered = await self._answered(start, utterance, in_doubt)
        if answered is None and retried and incoming.key is not None:
            # an earlier attempt did not finish: it may be anywhere in the dialog
            answered = await self._answered_earlier(start, incoming.key)
        if answered is not None:
            return await self._resent(incoming, dialog.dialog_id, dialog.arm, answered)
        held = None if self.handoffs is None else await self.handoffs.active(dialog.dialog_id)
        if held is not None:
            return await self._keep(held, start, utterance, place, incoming.events)
        history = start.history[-read:]
        if incoming.reward is not None:
            await self._rate_previous(history, incoming, dialog.arm)
        pending = self._unanswered(history, utterance)
        if pending is not None:  # stored by an unanswered attempt: answered now
            history = history[:-1]
            utterance.utt_id, utterance.date_time = pending.utt_id, pending.date_time
            await self.queues.note(place, utterance.utt_id)
        else:  # the store may give the utterance its id; noted on the place in one write
            await self._store.add_utterance(dialog.dialog_id, utterance, place)
        turn_identified(dialog.dialog_id, utterance.utt_id)
        incoming.events.emit("accepted", dialog_id=dialog.dialog_id, utt_id=utterance.utt_id)
        return Turn(
            dialog.dialog_id,
            start.human,
            dialog.bot,
            history,
            utterance,
            dialog.arm,
            events=incoming.events,
        )

    async def _answer(self, turn: Turn, rule: str | None, place: Place) -> TurnResult:
        """The pipeline's answer, which the user's next message may interrupt (then the
        utterance is kept unanswered, marked so); with a handoff ``rule``, the handoff's
        announcement, and no service runs."""
        if rule is not None:
            config = None if self.handoffs is None else self.handoffs.config
            announce = BotUtterance(
                text=config.announce if config else "", active_skill=HANDOFF_SKILL, confidence=1.0
            )
            return TurnResult(utterance=turn.utterance, bot_utterance=announce)
        try:
            return await self.queues.interruptible(place, self._executor.run(turn))
        except TurnInterrupted:
            # Kept without an answer, and marked so; the queue is left on the way out.
            utt_id = turn.utterance.utt_id
            await asyncio.shield(self._store.mark_interrupted(utt_id))
            log.info("dialog %s: turn %s interrupted", turn.dialog_id, utt_id)
            raise TurnInterrupted(utt_id) from None

    async def _finish(
        self, incoming: Incoming, turn: Turn, result: TurnResult, rule: str | None, place: Place
    ) -> _Outcome:
        """Hand the dialog to a person if the turn asked for one, store the turn's end
        (which leaves the queue too, unless the dialog is closed after it) and close the
        dialog if the message asked to."""
        handoffs, handoff = self.handoffs, None
        on = handoffs is not None and handoffs.config is not None  # people can take dialogs
        asked = _asked_for_person(result, rule) if on else None
        if asked is not None and handoffs is not None:
            handoff = await self._hand_off(handoffs, incoming.user_id, turn, result, asked)
        await self._store_end(turn, result, place, leave=not incoming.close_after)
        if incoming.close_after:
            try:
                await self._store.close_active_dialog(incoming.user_id)
            except StoreUnavailable:
                # the turn is stored and its client told 503: its retry is answered from
                # the store, and closes the dialog then
                closing = (turn.dialog_id, result)
                self.in_doubt.add(incoming.user_id, InDoubt(turn.utterance.utt_id, closing))
                raise
            if self.handoffs is not None:
                await self.handoffs.dialog_closed(turn.dialog_id)
                handoff = None
        if handoff is not None and self.handoffs is not None:
            self.handoffs.notices.notify(turn.dialog_id)
        return _Outcome(turn.dialog_id, turn.arm, result, handoff=handoff)

    async def _hand_off(
        self,
        handoffs: Handoffs,
        user_id: str,
        turn: Turn,
        result: TurnResult,
        asked: tuple[str, str],
    ) -> Handoff | None:
        """The dialog handed to a person, as ``asked`` (who asked, and why); None when it
        was already. A skill's words give way to the pipeline's announcement."""
        by, reason = asked
        handoff = await handoffs.requested(
            turn.dialog_id, user_id, by=by, reason=reason, history=[*turn.history, turn.utterance]
        )
        bot = result.bot_utterance
        if by.startswith("skill:") and handoffs.config is not None:
            bot.orig_text = bot.orig_text if bot.orig_text is not None else bot.text
            bot.text = handoffs.config.announce
        return handoff

    async def _resent(
        self,
        incoming: Incoming,
        dialog_id: str,
        arm: str | None,
        answered: TurnResult,
        *,
        closing: bool = True,
    ) -> _Outcome:
        """An earlier attempt's stored answer, sent again; nothing is stored twice.
        ``closing``: the answer is in the open dialog, which a ``close_after`` message
        closes now (its attempt may have been cut short before it did)."""
        log.warning(
            "dialog %s: message %s was answered before but its reply was not recorded; "
            "sending the stored answer again",
            dialog_id,
            printable(repr(incoming.key)),
        )
        incoming.events.emit("accepted", dialog_id=dialog_id, utt_id=answered.utterance.utt_id)
        if incoming.close_after and closing:
            await self._store.close_active_dialog(incoming.user_id)
        return _Outcome(dialog_id, arm, answered)

    async def _answered_before_close(
        self, incoming: Incoming, retried: bool
    ) -> tuple[str, TurnResult] | None:
        """An earlier attempt of this message stored in the user's dialog closed last, and
        its stored turn: a ``close_after`` message whose dialog was closed before its client
        got the answer (the database went away in between). Looked for before the turn
        opens a dialog, so that its retry opens none; only for a keyed message whose
        earlier attempt did not finish, or the repeat of an unkeyed one whose close this
        agent gave up on."""
        if incoming.key is not None:
            return await self._keyed_before_close(incoming.user_id, incoming.key, retried)
        doubt = self.in_doubt.get(incoming.user_id)
        if doubt is None or doubt.closing is None:
            return None
        dialog_id, stored = doubt.closing
        repeats = self._said_again(stored.utterance, incoming.text, incoming.attributes, utc_now())
        if repeats and await self._store.last_closed_dialog(incoming.user_id) == dialog_id:
            self.in_doubt.take(incoming.user_id)
            return dialog_id, stored
        return None  # not a repeat, or the close did not land: the turn is in the open dialog

    async def _keyed_before_close(
        self, user_id: str, key: str, retried: bool
    ) -> tuple[str, TurnResult] | None:
        """(:meth:`_answered_before_close` for a keyed message.) :class:`KeySuperseded` when
        it is stored there unanswered: that dialog is closed, so it never will be."""
        closed = await self._store.last_closed_dialog(user_id) if retried else None
        if closed is None:
            return None
        found = await self._store.keyed_turn(closed, key)
        if not found:
            return None
        if len(found) == 2:
            human, after = found
            if isinstance(human, HumanUtterance) and isinstance(after, BotUtterance):
                return closed, stored_turn(human, after)
        raise KeySuperseded(key)

    async def _rate_previous(
        self, history: list[Utterance], incoming: Incoming, arm: str | None
    ) -> None:
        """The message's reward, given to the bot's previous answer."""
        assert incoming.reward is not None
        previous = next((u for u in reversed(history) if isinstance(u, BotUtterance)), None)
        if previous is not None and await self._ratings.add_utterance_rating(
            previous.utt_id, None, incoming.user_id, incoming.reward
        ):
            self.metrics.observe_rating(incoming.reward, arm)

    async def _keep(
        self,
        handoff: Handoff,
        start: TurnStart,
        utterance: HumanUtterance,
        place: Place,
        events: TurnListener,
    ) -> _Outcome:
        """Store the user's message unanswered, marked :attr:`HumanUtterance.handed_off`:
        the dialog is waiting for or held by a person, who reads it; no service sees it.
        A keyed message sent again is stored once."""
        dialog_id = start.dialog.dialog_id
        last = start.history[-1] if start.history else None
        utterance.handed_off = True
        if (
            isinstance(last, HumanUtterance)
            and last.handed_off
            and utterance.message_key is not None
            and last.message_key == utterance.message_key
        ):
            utterance = last
        else:
            assert self.handoffs is not None
            await self.handoffs.append_utterance(dialog_id, handoff.user_id, utterance)
        turn_identified(dialog_id, utterance.utt_id)
        await self.queues.note(place, utterance.utt_id)
        events.emit("accepted", dialog_id=dialog_id, utt_id=utterance.utt_id)
        assert self.handoffs is not None
        self.handoffs.kept(handoff, utterance)
        return _Outcome(dialog_id, start.dialog.arm, kept=utterance, handoff=handoff)

    async def _answered(
        self, start: TurnStart, utterance: HumanUtterance, in_doubt: str | None = None
    ) -> TurnResult | None:
        """The stored last turn of this message's earlier attempt, if it is one: its key's,
        or, without keys, the same message's when the store just completed that turn's end
        (the attempt died before its client got the reply), or when that turn is the one
        ``in_doubt`` (:class:`EndsInDoubt`: its end was stored, but its client told 503).
        Sent again as it is stored: a history read as shown is read whole for it."""
        history = start.history
        if len(history) < 2:
            return None
        human, bot = history[-2], history[-1]
        if not (isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance)):
            return None
        if human.handed_off:  # kept for a person: what follows is not its answer
            return None
        retry = (
            utterance.message_key is not None
            or start.completed_last_turn
            or (in_doubt is not None and human.utt_id == in_doubt)
        )
        if not (retry and self._repeats(human, utterance)):
            return None
        if not self._executor.whole_history:  # read as shown: the turn's two utterances whole
            match await self._store.utterances([human.utt_id, bot.utt_id]):
                case [HumanUtterance() as stored_human, BotUtterance() as stored_bot]:
                    human, bot = stored_human, stored_bot
                # (else erased since they were read: what the read as shown gave is all left)
        return stored_turn(human, bot)

    async def _answered_earlier(self, start: TurnStart, key: str) -> TurnResult | None:
        """An earlier attempt of this keyed message, wherever the dialog holds it: its
        stored turn, None when it is not stored or is the last utterance (answered now),
        :class:`KeySuperseded` when a later message came after it."""
        found = await self._store.keyed_turn(start.dialog.dialog_id, key)
        if not found or len(found) == 1:
            return None
        human, after = found
        if isinstance(human, HumanUtterance) and isinstance(after, BotUtterance):
            return stored_turn(human, after)
        raise KeySuperseded(key)

    def _unanswered(
        self, history: list[Utterance], utterance: HumanUtterance
    ) -> HumanUtterance | None:
        """The stored, unanswered utterance this message repeats, if it is one."""
        last = history[-1] if history else None
        if (
            isinstance(last, HumanUtterance)
            and not last.interrupted  # cancelled on purpose: never answered later
            and not last.handed_off  # kept for a person: the bot never answers it
            and self._repeats(last, utterance)
        ):
            return last
        return None

    def _repeats(self, stored: HumanUtterance, utterance: HumanUtterance) -> bool:
        """Whether ``utterance`` is ``stored`` sent again: the same idempotency key, or,
        when neither has one, the same text and attributes within the retry window."""
        if stored.message_key is not None or utterance.message_key is not None:
            return stored.message_key == utterance.message_key
        return self._said_again(stored, utterance.text, utterance.attributes, utterance.date_time)

    def _said_again(
        self, stored: HumanUtterance, text: str, attributes: dict[str, Any], at: datetime
    ) -> bool:
        """Whether a message without a key, said at ``at``, repeats ``stored``: the same text
        and attributes within the retry window."""
        return (
            stored.text == text
            and stored.attributes == attributes
            and at - stored.date_time <= self._retry_window
        )

    async def _store_end(
        self, turn: Turn, result: TurnResult, place: Place, *, leave: bool = True
    ) -> None:
        """Store the turn's end. When the database goes away in the middle of it, the end is
        written again (the store completes what was stored and writes nothing twice) until
        it is stored or ``end_retry`` seconds have passed: a client told 503 could not know
        whether its message was answered, and without an idempotency key its retry could
        not be told from the same text sent again. ``leave``: the end leaves ``place`` too
        (else it is only fenced on it, and left after the dialog is closed)."""
        dialog_id, human_id = turn.dialog_id, turn.human.id
        deadline = time.monotonic() + self._end_retry
        retrying, pause = False, 0.1
        while True:
            try:
                await self._write_end(dialog_id, human_id, result, place, leave, retrying)
                return
            except StoreUnavailable as exc:
                if time.monotonic() + pause > deadline:
                    # The end may be stored all the same: its retry must find it.
                    self.in_doubt.add(place.user_id, InDoubt(turn.utterance.utt_id))
                    raise
                log.warning(
                    "dialog %s: the database went away while the turn's end was written "
                    "(%s); writing it again",
                    dialog_id,
                    printable(exc),
                )
            await asyncio.sleep(pause)  # back-off while the database comes back
            retrying, pause = True, min(pause * 2, 1.0)

    async def _write_end(
        self,
        dialog_id: str,
        human_id: str,
        result: TurnResult,
        place: Place,
        leave: bool,
        retrying: bool,
    ) -> None:
        left, kept = (place, None) if leave else (None, place)
        try:
            await self._store.finish_turn(
                TurnEnd(
                    dialog_id,
                    human_id,
                    result.utterance,
                    result.bot_utterance,
                    result.human_attributes,
                    result.bot_attributes,
                    human_profile=result.human_profile,
                    replace_human_attributes=result.replace_human_attributes,
                    leave=left,
                    keep=kept,
                ),
                retrying=retrying,
            )
        except StoreWriteRefused as exc:
            log.error(
                "dialog %s: the finished turn was refused (%s); storing it without "
                "the services' outputs",
                dialog_id,
                printable(exc),
            )
            utterance, bot_utterance = result.without_outputs(str(exc))
            await self._store.finish_turn(
                TurnEnd(dialog_id, human_id, utterance, bot_utterance, leave=left, keep=kept)
            )
            # The store may have given the answer its id: the client gets that one.
            result.bot_utterance.utt_id = bot_utterance.utt_id
