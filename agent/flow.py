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
  within :data:`RETRY_WINDOW`.

Every turn of a dialog runs on the pipeline of its experiment arm (:mod:`agent.pipeline.arms`);
a finished turn the database refuses for its content is stored without the services'
outputs, the refusal among its errors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from agent.handoff import HandoffConflict, Handoffs
from agent.idempotency import IdempotencyKeys, KeyClaim, KeyForgotten, KeySuperseded
from agent.metrics import Metrics
from agent.pipeline.arms import Experiment
from agent.pipeline.config import HANDOFF_FIELD, DoubleTexting
from agent.pipeline.engine import TurnExecutor
from agent.pipeline.turn import Turn, TurnResult
from agent.queues import TurnInterrupted, UserQueues
from agent.state.handoff import HANDOFF_SKILL, Handoff
from agent.state.models import FALLBACK_SKILL, BotUtterance, HumanUtterance, Utterance
from agent.store.base import (
    Place,
    RatingStore,
    StoreUnavailable,
    StoreWriteRefused,
    TurnEnd,
    TurnStart,
    TurnStore,
)
from agent.telemetry import Telemetry, printable, turn_answered, turn_identified
from agent.telemetry.turn_events import emit

#: Seconds during which a message sent again after an unanswered attempt (a 503, a dead
#: agent) answers that attempt instead of being stored twice.
RETRY_WINDOW = 300.0
#: Seconds during which a turn's end that the database going away cut short is written again
#: (completing what it stored, never twice) before the client gets 503.
END_RETRY = 10.0

log = logging.getLogger("chorus.flow")

#: Payloads that end the user's open dialog instead of being answered (as in dp-agent).
CLOSING_COMMANDS = frozenset({"/start", "/close"})


@dataclass(frozen=True, slots=True)
class Incoming:
    """One message as a chat endpoint received it, checked: what :meth:`MessageFlow.reply`
    answers."""

    user_id: str
    text: str
    attributes: dict[str, Any] = field(default_factory=dict)
    #: the client's idempotency key, prefixed with the route's kind (``chat:``); None: none
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
        experiment: Experiment | None = None,
        arm_executors: dict[str, TurnExecutor] | None = None,
        handoffs: Handoffs | None = None,
    ) -> None:
        self._store = store
        self._ratings = ratings
        #: None: dialogs are never handed to a person (as with no handoff in the pipeline)
        self.handoffs = handoffs
        self._executor = executor
        #: with an experiment: each arm's executor (``executor`` is its first arm's)
        self._experiment = experiment
        self._arm_executors = arm_executors or {}
        self._channel_type = channel_type
        self._retry_window = timedelta(seconds=retry_window)
        self._end_retry = end_retry
        self.metrics = metrics or Metrics()
        self.queues = queues
        self.keys = keys
        self.telemetry = telemetry or Telemetry()

    async def reply(self, incoming: Incoming) -> Answer:
        """The answer to one message, given once per idempotency key: a retry of an
        answered key gets the stored answer and runs nothing."""
        claim = await self.keys.claim(incoming.user_id, incoming.key, incoming.fingerprint)
        if claim.answered is not None:
            return await self._recorded(claim)
        policy = incoming.double_texting or self._executor.pipeline.double_texting
        async with self.keys.held(claim):
            if incoming.closes:
                answer = await self.close(incoming.user_id, policy)
            else:
                outcome = await self._run(
                    incoming.user_id,
                    incoming.text,
                    incoming.attributes,
                    reward=incoming.reward,
                    close_after=incoming.close_after,
                    key=incoming.key,
                    retried=claim.retried,
                    policy=policy,
                )
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

    async def run_turn(
        self,
        user_id: str,
        text: str,
        attributes: dict[str, Any],
        *,
        reward: float | None = None,
        close_after: bool = False,
        key: str | None = None,
        retried: bool = False,
        policy: DoubleTexting = "enqueue",
    ) -> tuple[TurnResult, str]:
        """One turn, answered (a caller that knows no handoff: with the dialog handed to a
        person, :class:`~agent.handoff.HandoffConflict`); see :meth:`_run`."""
        outcome = await self._run(
            user_id,
            text,
            attributes,
            reward=reward,
            close_after=close_after,
            key=key,
            retried=retried,
            policy=policy,
        )
        if outcome.result is None:
            raise HandoffConflict(f"dialog {outcome.dialog_id} is with a person: not answered")
        return outcome.result, outcome.dialog_id

    async def _run(
        self,
        user_id: str,
        text: str,
        attributes: dict[str, Any],
        *,
        reward: float | None = None,
        close_after: bool = False,
        key: str | None = None,
        retried: bool = False,
        policy: DoubleTexting = "enqueue",
    ) -> _Outcome:
        """One turn; ``reward`` rates the previous bot answer, ``close_after`` ends the
        dialog once this answer is stored (ParlAI's ``episode_done``), ``key`` is the
        client's idempotency key, stored with the utterance; ``retried``: an earlier
        attempt with this key did not finish; ``policy``: what this message does when
        another of the user's is being answered."""
        started = time.perf_counter()
        with self.metrics.in_flight.track_inprogress(), self.telemetry.turn(user_id):
            async with self.queues.turn(user_id, policy) as place:
                outcome = await self._turn(
                    user_id, text, attributes, reward, close_after, key, retried, place
                )
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

    async def _turn(
        self,
        user_id: str,
        text: str,
        attributes: dict[str, Any],
        reward: float | None,
        close_after: bool,
        key: str | None,
        retried: bool,
        place: Place,
    ) -> _Outcome:
        """The turn, its dialog's id and the dialog's experiment arm (None: no experiment);
        or, while the dialog is with a person, the message kept unanswered."""
        store = self._store
        experiment = self._experiment
        executors = list(self._arm_executors.values()) if experiment else []
        executors = executors or [self._executor]
        # The dialog's arm is known once it is read: read as far as the longest window.
        read = max(max(e.pipeline.history_window for e in executors), 1)
        # A keyed message reads at least the last turn, to find an earlier attempt's answer.
        start = await store.open_turn(
            user_id,
            self._channel_type,
            max(read, 2) if key else read,
            arm=experiment.arm_for(user_id) if experiment else None,
            seen=place.seen,
        )
        human, dialog = start.human, start.dialog
        arm = dialog.arm if experiment else None
        executor = self._arm_executors.get(arm or "", self._executor)
        window = max(executor.pipeline.history_window, 1)
        utterance = HumanUtterance(
            text=text, user=human.model_dump(mode="json"), attributes=attributes, message_key=key
        )
        answered = self._answered(start, utterance)
        if answered is None and retried and key is not None:
            answered = await self._answered_earlier(start, key)
        if answered is not None:
            log.warning(
                "dialog %s: message %s was answered before but its reply was not recorded; "
                "sending the stored answer again",
                dialog.dialog_id,
                printable(repr(key)),
            )
            emit("accepted", dialog_id=dialog.dialog_id, utt_id=answered.utterance.utt_id)
            if close_after:
                await store.close_active_dialog(user_id)
            return _Outcome(dialog.dialog_id, arm, answered)
        history = start.history[-window:]
        handoffs = self.handoffs
        held = None if handoffs is None else await handoffs.active(dialog.dialog_id)
        if held is not None:
            return await self._keep(held, start, utterance, place)
        if reward is not None:
            previous = next((u for u in reversed(history) if isinstance(u, BotUtterance)), None)
            if previous is not None and await self._ratings.add_utterance_rating(
                previous.utt_id, None, user_id, reward
            ):
                self.metrics.observe_rating(reward, arm)
        pending = self._unanswered(history, utterance)
        if pending is not None:
            history = history[:-1]
            utterance.utt_id, utterance.date_time = pending.utt_id, pending.date_time
        if pending is None:  # the store may give the utterance its id
            await store.add_utterance(dialog.dialog_id, utterance)
        turn_identified(dialog.dialog_id, utterance.utt_id)
        await self.queues.note(place, utterance.utt_id)
        emit("accepted", dialog_id=dialog.dialog_id, utt_id=utterance.utt_id)
        config = None if handoffs is None else handoffs.config
        rule = None if config is None else config.matching(text)
        try:
            if rule is not None:  # a person, asked for in words a rule knows: no service runs
                result = TurnResult(
                    utterance=utterance,
                    bot_utterance=BotUtterance(
                        text=config.announce if config else "",
                        active_skill=HANDOFF_SKILL,
                        confidence=1.0,
                    ),
                )
            else:
                result = await self.queues.interruptible(
                    place,
                    executor.run(Turn(dialog.dialog_id, human, dialog.bot, history, utterance)),
                )
        except TurnInterrupted:
            # Kept without an answer, and marked so; the queue is left on the way out.
            await asyncio.shield(store.mark_interrupted(utterance.utt_id))
            log.info("dialog %s: turn %s interrupted", dialog.dialog_id, utterance.utt_id)
            raise TurnInterrupted(utterance.utt_id) from None
        handoff = None
        asked = None if handoffs is None or config is None else _asked_for_person(result, rule)
        if asked is not None and handoffs is not None and config is not None:
            by, reason = asked
            handoff = await handoffs.requested(
                dialog.dialog_id, user_id, by=by, reason=reason, history=[*history, utterance]
            )
            bot = result.bot_utterance
            if rule is None:  # the skill's words give way to the pipeline's
                bot.orig_text = bot.orig_text if bot.orig_text is not None else bot.text
                bot.text = config.announce
        # The turn's last write leaves the queue too, unless the dialog is closed after it.
        await self._finish(dialog.dialog_id, human.id, result, None if close_after else place)
        if close_after:
            await store.close_active_dialog(user_id)
            if handoffs is not None:
                await handoffs.dialog_closed(dialog.dialog_id)
                handoff = None
        if handoff is not None and handoffs is not None:
            handoffs.notices.notify(dialog.dialog_id)
        return _Outcome(dialog.dialog_id, arm, result, handoff=handoff)

    async def _keep(
        self, handoff: Handoff, start: TurnStart, utterance: HumanUtterance, place: Place
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
        emit("accepted", dialog_id=dialog_id, utt_id=utterance.utt_id)
        assert self.handoffs is not None
        self.handoffs.kept(handoff, utterance)
        return _Outcome(dialog_id, start.dialog.arm, kept=utterance, handoff=handoff)

    def _answered(self, start: TurnStart, utterance: HumanUtterance) -> TurnResult | None:
        """The stored last turn of this message's earlier attempt, if it is one: its key's,
        or, without keys, the same message's when the store just completed that turn's end
        (the attempt died before its client got the reply)."""
        history = start.history
        if len(history) < 2:
            return None
        human, bot = history[-2], history[-1]
        if not (isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance)):
            return None
        if human.handed_off:  # kept for a person: what follows is not its answer
            return None
        retry = utterance.message_key is not None or start.completed_last_turn
        if retry and self._repeats(human, utterance):
            return stored_turn(human, bot)
        return None

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
        return (
            stored.text == utterance.text
            and stored.attributes == utterance.attributes
            and utterance.date_time - stored.date_time <= self._retry_window
        )

    async def _finish(
        self, dialog_id: str, human_id: str, result: TurnResult, place: Place | None
    ) -> None:
        """Store the turn's end. When the database goes away in the middle of it, the end is
        written again (the store completes what was stored and writes nothing twice) until
        it is stored or ``end_retry`` seconds have passed: a client told 503 could not know
        whether its message was answered, and without an idempotency key its retry could
        not be told from the same text sent again."""
        deadline = time.monotonic() + self._end_retry
        retrying, pause = False, 0.1
        while True:
            try:
                await self._write_end(dialog_id, human_id, result, place, retrying)
                return
            except StoreUnavailable as exc:
                if time.monotonic() + pause > deadline:
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
        place: Place | None,
        retrying: bool,
    ) -> None:
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
                    leave=place,
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
                TurnEnd(dialog_id, human_id, utterance, bot_utterance, leave=place)
            )
            # The store may have given the answer its id: the client gets that one.
            result.bot_utterance.utt_id = bot_utterance.utt_id
