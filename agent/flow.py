"""The message flow: a user's message taken from arrival to reply, the work behind the chat
endpoints, in one object (:class:`MessageFlow`): claim the idempotency key, take the
user's place in line, run the turn, remember the reply.

The order is what makes a message impossible to lose: the human utterance is stored before
any service is called, and everything the pipeline made of it is written in one step at
the end, together with leaving the line. Messages of one user take turns
(:mod:`agent.lines`): each starts after the previous one's answer is stored, whichever
replica handles it.

Two failures are absorbed here rather than passed to the client:

* A message sent again after an attempt that stored its utterance but no answer (a 503
  while the database was away, an agent killed mid-turn) answers that utterance instead
  of storing it twice, so the dialog keeps alternating human, bot.
* A message with an idempotency key sent again after an attempt that stored its whole
  turn but could not record the reply under the key (the database went away between the
  two writes) gets the stored answer back: the turn is not run or stored again. The key
  is kept on the stored human utterance (``message_key``) for that.
* If the database refuses the finished turn for its content (which the storage bounds
  should make impossible), the turn is stored without the services' outputs, with the
  refusal recorded among its errors, and the client still gets its answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from agent.dream.executor import DreamExecutor
from agent.idempotency import IdempotencyKeys, Reply
from agent.lines import UserLines
from agent.metrics import Metrics
from agent.pipeline.executor import Executor, Turn, TurnResult
from agent.state.models import FALLBACK_SKILL, BotUtterance, HumanUtterance, Utterance
from agent.store.base import Place, Store, StoreWriteRefused
from agent.telemetry import Telemetry, printable, turn_answered, turn_identified

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
        executor: Executor | DreamExecutor,
        channel_type: str,
        metrics: Metrics | None = None,
        lines: UserLines | None = None,
        keys: IdempotencyKeys | None = None,
        retry_window: float = 300.0,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._store = store
        self._executor = executor
        self._channel_type = channel_type
        self._retry_window = timedelta(seconds=retry_window)
        self.metrics = metrics or Metrics()
        self.lines = lines or UserLines(store)
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
    ) -> Reply:
        """The reply to one message: answered once per idempotency ``key`` (``request`` is
        what a retry must repeat), in the user's line, shaped by ``shape``. ``reward``
        rates the previous bot answer; ``close_after`` ends the dialog once this answer is
        stored (ParlAI's ``episode_done``); with ``closing_commands``, ``/start`` and
        ``/close`` end the open dialog instead of being answered (as in dp-agent)."""

        async def answer() -> Reply:
            if closing_commands and text.strip() in CLOSING_COMMANDS:
                return shape(await self.close(user_id))
            result, dialog_id = await self.run_turn(
                user_id, text, attributes, reward=reward, close_after=close_after, key=key
            )
            return shape(Answer(dialog_id, result))

        return await self.keys.answer_once(user_id, key, request, answer, reply_type)

    async def close(self, user_id: str) -> Answer:
        """End the user's open dialog, in the user's line."""
        async with self.lines.turn(user_id):
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
    ) -> tuple[TurnResult, str]:
        """One turn; ``reward`` rates the previous bot answer, ``close_after`` ends the
        dialog once this answer is stored (ParlAI's ``episode_done``), ``key`` is the
        client's idempotency key, stored with the utterance."""
        started = time.perf_counter()
        with self.metrics.in_flight.track_inprogress(), self.telemetry.turn(user_id):
            async with self.lines.turn(user_id) as place:
                result, dialog_id = await self._turn(
                    user_id, text, attributes, reward, close_after, key, place
                )
            bot = result.bot_utterance
            turn_answered(
                bot.utt_id,
                bot.active_skill,
                "fallback" if bot.active_skill == FALLBACK_SKILL else "answered",
                len(result.utterance.errors),
            )
        self.metrics.observe_turn(result, time.perf_counter() - started)
        return result, dialog_id

    async def _turn(
        self,
        user_id: str,
        text: str,
        attributes: dict[str, Any],
        reward: float | None,
        close_after: bool,
        key: str | None,
        place: Place,
    ) -> tuple[TurnResult, str]:
        store = self._store
        window = max(self._executor.pipeline.history_window, 1)
        # A keyed message reads at least the last turn, to find an earlier attempt's answer.
        start = await store.open_turn(
            user_id, self._channel_type, max(window, 2) if key else window
        )
        human, dialog = start.human, start.dialog
        answered = self._answered(start.history, key)
        if answered is not None:
            log.warning(
                "dialog %s: message %s was answered before but its reply was not recorded; "
                "sending the stored answer again",
                dialog.dialog_id,
                printable(repr(key)),
            )
            if close_after:
                await store.close_active_dialog(user_id)
            return answered, dialog.dialog_id
        history = start.history[-window:]
        if reward is not None:
            previous = next((u for u in reversed(history) if isinstance(u, BotUtterance)), None)
            if previous is not None:
                await store.rate_utterance(user_id, previous.utt_id, reward)
        utterance = HumanUtterance(
            text=text, user=human.model_dump(mode="json"), attributes=attributes, message_key=key
        )
        pending = self._unanswered(history, utterance)
        if pending is not None:
            history = history[:-1]
            utterance.utt_id, utterance.date_time = pending.utt_id, pending.date_time
        if pending is None:  # the store may give the utterance its id
            await store.add_utterance(dialog.dialog_id, utterance)
        turn_identified(dialog.dialog_id, utterance.utt_id)
        result = await self._executor.run(
            Turn(dialog.dialog_id, human, dialog.bot, history, utterance)
        )
        # The turn's last write leaves the line too, unless the dialog is closed after it.
        await self._finish(dialog.dialog_id, human.id, result, None if close_after else place)
        if close_after:
            await store.close_active_dialog(user_id)
        return result, dialog.dialog_id

    @staticmethod
    def _answered(history: list[Utterance], key: str | None) -> TurnResult | None:
        """The stored turn of this keyed message's earlier attempt, if it is the last."""
        if key is None or len(history) < 2:
            return None
        human, bot = history[-2], history[-1]
        if (
            isinstance(human, HumanUtterance)
            and isinstance(bot, BotUtterance)
            and human.message_key == key
        ):
            return TurnResult(utterance=human, bot_utterance=bot)
        return None

    def _unanswered(
        self, history: list[Utterance], utterance: HumanUtterance
    ) -> HumanUtterance | None:
        """The stored, unanswered utterance this message repeats, if it is one: the one
        stored with its key, or the same text sent again shortly."""
        last = history[-1] if history else None
        if not isinstance(last, HumanUtterance):
            return None
        if last.message_key is not None and last.message_key == utterance.message_key:
            return last
        if (
            last.text == utterance.text
            and last.attributes == utterance.attributes
            and utterance.date_time - last.date_time <= self._retry_window
        ):
            return last
        return None

    async def _finish(
        self, dialog_id: str, human_id: str, result: TurnResult, place: Place | None
    ) -> None:
        try:
            await self._store.finish_turn(
                dialog_id,
                human_id,
                result.utterance,
                result.bot_utterance,
                result.human_attributes,
                result.bot_attributes,
                human_profile=result.human_profile,
                replace_human_attributes=result.replace_human_attributes,
                place=place,
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
                dialog_id, human_id, utterance, bot_utterance, {}, {}, place=place
            )
            # The store may have given the answer its id: the client gets that one.
            result.bot_utterance.utt_id = bot_utterance.utt_id
