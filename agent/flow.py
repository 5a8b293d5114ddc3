"""The message flow: a user's message taken from arrival to reply, the work behind the chat
endpoints, in one object (:class:`MessageFlow`): claim the idempotency key, take the
user's place in the queue, run the turn, remember the reply.

The order is what makes a message impossible to lose: the human utterance is stored before
any service is called, and everything the pipeline made of it is written in one step at
the end, together with leaving the queue. Messages of one user take turns
(:mod:`agent.queues`): each starts after the previous one's answer is stored, whichever
replica handles it.

Failures of an earlier attempt are absorbed here rather than passed to the client:

* A message sent again after an attempt that stored its utterance but no answer (a 503
  while the database was away, an agent killed mid-turn) answers that utterance instead
  of storing it twice, so the dialog keeps alternating human, bot. A retry is the same
  idempotency key, or, without keys, the same text and attributes within the retry
  window; a message with another key is another message, even with the same text.
* A message sent again after an attempt that stored its whole turn but whose client never
  got the reply gets the stored answer back: the turn is not run or stored again. With an
  idempotency key that is any stored turn of that key (the key is kept on the stored human
  utterance, ``message_key``); without one, the last turn when the store had to complete
  its end (:attr:`TurnStart.completed_last_turn`: the attempt died between its writes).
* A keyed message whose earlier attempt stored it unanswered, after which a later message
  was answered, is refused (:class:`KeySuperseded`): it stays where it is, unanswered.
* With an experiment (:mod:`agent.pipeline.arms`), a new dialog is opened on the arm the
  user's id draws, and every turn of a dialog runs on the pipeline of the arm stored on it
  (the first arm's for a dialog without one, or on an arm no longer configured).
* If the database refuses the finished turn for its content (which the storage bounds
  should make impossible), the turn is stored without the services' outputs, with the
  refusal recorded among its errors, and the client still gets its answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from agent.idempotency import IdempotencyKeys, KeySuperseded, Reply
from agent.metrics import Metrics
from agent.pipeline.arms import Experiment
from agent.pipeline.config import DoubleTexting
from agent.pipeline.engine import TurnExecutor
from agent.pipeline.turn import Turn, TurnResult
from agent.queues import TurnInterrupted, UserQueues
from agent.state.models import FALLBACK_SKILL, BotUtterance, HumanUtterance, Utterance
from agent.store.base import (
    Place,
    Store,
    StoreUnavailable,
    StoreWriteRefused,
    TurnEnd,
    TurnStart,
)
from agent.telemetry import Telemetry, printable, turn_answered, turn_identified
from agent.telemetry.events import emit

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
class Answer:
    """What the flow made of a message, for a route to shape into its reply."""

    dialog_id: str | None
    #: the turn; None when the message was a closing command
    result: TurnResult | None

    def debug(self) -> dict[str, Any]:
        """The turn's hypotheses and annotations, for dp-agent's ``debug_output``."""
        if self.result is None:
            return {}
        utterance = self.result.utterance
        return {
            "hypotheses": [h.model_dump(mode="json") for h in utterance.hypotheses],
            "annotations": dict(utterance.annotations),
        }


#: What a closing command answers.
CLOSED = "The dialog is closed; your next message starts a new one."


class MessageFlow:
    """Takes one message of a user from claim to reply; see the module docstring."""

    def __init__(
        self,
        store: Store,
        executor: TurnExecutor,
        channel_type: str,
        metrics: Metrics | None = None,
        queues: UserQueues | None = None,
        keys: IdempotencyKeys | None = None,
        retry_window: float = RETRY_WINDOW,
        telemetry: Telemetry | None = None,
        end_retry: float = END_RETRY,
        experiment: Experiment | None = None,
        arm_executors: dict[str, TurnExecutor] | None = None,
    ) -> None:
        self._store = store
        self._executor = executor
        #: with an experiment: each arm's executor (``executor`` is its first arm's)
        self._experiment = experiment
        self._arm_executors = arm_executors or {}
        self._channel_type = channel_type
        self._retry_window = timedelta(seconds=retry_window)
        self._end_retry = end_retry
        self.metrics = metrics or Metrics()
        self.queues = queues or UserQueues(store)
        self.keys = keys or IdempotencyKeys(store)
        self.telemetry = telemetry or Telemetry()

    async def reply(
        self,
        user_id: str,
        text: str,
        attributes: dict[str, Any],
        *,
        key: str | None,
        request: BaseModel,
        shape: Callable[[Answer], Reply],
        reply_type: type[Reply],
        reward: float | None = None,
        close_after: bool = False,
        closing_commands: bool = False,
        double_texting: DoubleTexting | None = None,
    ) -> Reply:
        """The reply to one message: answered once per idempotency ``key`` (``request`` is
        what a retry must repeat), in the user's queue, shaped by ``shape``. ``reward``
        rates the previous bot answer; ``close_after`` ends the dialog once this answer is
        stored (ParlAI's ``episode_done``); with ``closing_commands``, ``/start`` and
        ``/close`` end the open dialog instead of being answered (as in dp-agent).
        ``double_texting`` overrides the pipeline's policy for a message that arrives
        while another of the user's is answered."""
        policy = double_texting or self._executor.pipeline.double_texting

        async def answer(retried: bool) -> Reply:
            if closing_commands and text.strip() in CLOSING_COMMANDS:
                return shape(await self.close(user_id, policy))
            result, dialog_id = await self.run_turn(
                user_id,
                text,
                attributes,
                reward=reward,
                close_after=close_after,
                key=key,
                retried=retried,
                policy=policy,
            )
            return shape(Answer(dialog_id, result))

        return await self.keys.answer_once(user_id, key, request, answer, reply_type)

    async def close(self, user_id: str, policy: DoubleTexting = "enqueue") -> Answer:
        """End the user's open dialog, in the user's queue."""
        async with self.queues.turn(user_id, policy):
            closed = await self._store.close_active_dialog(user_id)
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
        """One turn; ``reward`` rates the previous bot answer, ``close_after`` ends the
        dialog once this answer is stored (ParlAI's ``episode_done``), ``key`` is the
        client's idempotency key, stored with the utterance; ``retried``: an earlier
        attempt with this key did not finish; ``policy``: what this message does when
        another of the user's is being answered."""
        started = time.perf_counter()
        with self.metrics.in_flight.track_inprogress(), self.telemetry.turn(user_id):
            async with self.queues.turn(user_id, policy) as place:
                result, dialog_id, arm = await self._turn(
                    user_id, text, attributes, reward, close_after, key, retried, place
                )
            bot = result.bot_utterance
            turn_answered(
                bot.utt_id,
                bot.active_skill,
                "fallback" if bot.active_skill == FALLBACK_SKILL else "answered",
                len(result.utterance.errors),
            )
        self.metrics.observe_turn(result, time.perf_counter() - started, arm=arm)
        return result, dialog_id

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
    ) -> tuple[TurnResult, str, str | None]:
        """The turn, its dialog's id and the dialog's experiment arm (None: no experiment)."""
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
            return answered, dialog.dialog_id, arm
        history = start.history[-window:]
        if reward is not None:
            previous = next((u for u in reversed(history) if isinstance(u, BotUtterance)), None)
            if previous is not None and await store.add_utterance_rating(
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
        try:
            result = await self.queues.interruptible(
                place,
                executor.run(Turn(dialog.dialog_id, human, dialog.bot, history, utterance)),
            )
        except TurnInterrupted:
            # Kept without an answer, and marked so; the queue is left on the way out.
            await asyncio.shield(store.mark_interrupted(utterance.utt_id))
            log.info("dialog %s: turn %s interrupted", dialog.dialog_id, utterance.utt_id)
            raise TurnInterrupted(utterance.utt_id) from None
        # The turn's last write leaves the queue too, unless the dialog is closed after it.
        await self._finish(dialog.dialog_id, human.id, result, None if close_after else place)
        if close_after:
            await store.close_active_dialog(user_id)
        return result, dialog.dialog_id, arm

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
        retry = utterance.message_key is not None or start.completed_last_turn
        if retry and self._repeats(human, utterance):
            return TurnResult(utterance=human, bot_utterance=bot)
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
            return TurnResult(utterance=human, bot_utterance=after)
        raise KeySuperseded(key)

    def _unanswered(
        self, history: list[Utterance], utterance: HumanUtterance
    ) -> HumanUtterance | None:
        """The stored, unanswered utterance this message repeats, if it is one."""
        last = history[-1] if history else None
        if (
            isinstance(last, HumanUtterance)
            and not last.interrupted  # cancelled on purpose: never answered later
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
        again, pause = False, 0.1
        while True:
            try:
                await self._write_end(dialog_id, human_id, result, place, again)
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
            again, pause = True, min(pause * 2, 1.0)

    async def _write_end(
        self,
        dialog_id: str,
        human_id: str,
        result: TurnResult,
        place: Place | None,
        again: bool,
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
                again=again,
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
