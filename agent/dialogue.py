"""A user's message, taken from arrival to answer: the work behind ``POST /``.

The order is what makes a message impossible to lose: the human utterance is stored before
any service is called, and everything the pipeline made of it is written in one step at
the end. Messages of one user take turns (:mod:`agent.ordering`): each starts after the
previous one's answer is stored, whichever replica handles it.

Two failures are absorbed here rather than passed to the client:

* A message sent again after an attempt that stored its utterance but no answer (a 503
  while the database was away, an agent killed mid-turn) answers that utterance instead
  of storing it twice, so the dialog keeps alternating human, bot.
* If the database refuses the finished turn for its content (which the storage bounds
  should make impossible), the turn is stored without the services' outputs, with the
  refusal recorded among its errors, and the client still gets its answer.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent.dream.executor import DreamExecutor
from agent.idempotency import MessageIds
from agent.metrics import Metrics
from agent.ordering import UserLines
from agent.pipeline.executor import FALLBACK_SKILL, Executor, Turn, TurnResult
from agent.state.models import BotUtterance, HumanUtterance, Utterance
from agent.store.base import Store, StoreWriteRefused
from agent.telemetry import Telemetry, turn_answered, turn_identified

log = logging.getLogger("chorus.dialogue")

#: Payloads that end the user's open dialog instead of being answered (as in dp-agent).
CLOSING_COMMANDS = frozenset({"/start", "/close"})


@dataclass(frozen=True, slots=True)
class Reply:
    """What the chat API answers."""

    dialog_id: str | None
    utt_id: str | None
    user_id: str
    response: str
    active_skill: str | None
    #: the turn's hypotheses and annotations, for dp-agent's ``debug_output``
    debug: dict[str, Any] | None = None


class DialogueManager:
    """Ties the store and the executor together for one message at a time."""

    def __init__(self, store: Store, executor: Executor | DreamExecutor, channel_type: str,
                 metrics: Metrics | None = None, lines: UserLines | None = None,
                 claims: MessageIds | None = None, retry_window: float = 300.0,
                 telemetry: Telemetry | None = None) -> None:
        self._store = store
        self._executor = executor
        self._channel_type = channel_type
        self._retry_window = timedelta(seconds=retry_window)
        self.metrics = metrics or Metrics()
        self.lines = lines or UserLines(store)
        self.claims = claims or MessageIds(store)
        self.telemetry = telemetry or Telemetry()

    async def handle(self, user_id: str, text: str, attributes: dict[str, Any]) -> Reply:
        if text.strip() in CLOSING_COMMANDS:
            async with self.lines.turn(user_id):
                closed = await self._store.close_active_dialog(user_id)
            return Reply(closed, None, user_id,
                         "The dialog is closed; your next message starts a new one.", None)
        result, dialog_id = await self.run_turn(user_id, text, attributes)
        bot = result.bot_utterance
        debug = None
        if attributes.get("debug_output"):
            debug = {"hypotheses": [h.model_dump(mode="json")
                                    for h in result.utterance.hypotheses],
                     "annotations": dict(result.utterance.annotations)}
        return Reply(dialog_id, bot.utt_id, user_id, bot.text, bot.active_skill, debug)

    async def run_turn(
        self, user_id: str, text: str, attributes: dict[str, Any], *,
        reward: float | None = None, close_after: bool = False,
    ) -> tuple[TurnResult, str]:
        """One turn; ``reward`` rates the previous bot answer, ``close_after`` ends the
        dialog once this answer is stored (ParlAI's ``episode_done``)."""
        started = time.perf_counter()
        with self.metrics.in_flight.track_inprogress(), self.telemetry.turn(user_id):
            async with self.lines.turn(user_id):
                result, dialog_id = await self._turn(user_id, text, attributes, reward,
                                                     close_after)
            bot = result.bot_utterance
            turn_answered(bot.utt_id, bot.active_skill,
                          "fallback" if bot.active_skill == FALLBACK_SKILL else "answered",
                          len(result.utterance.errors))
        self.metrics.observe_turn(result, time.perf_counter() - started)
        return result, dialog_id

    async def _turn(
        self, user_id: str, text: str, attributes: dict[str, Any], reward: float | None,
        close_after: bool,
    ) -> tuple[TurnResult, str]:
        store = self._store
        window = max(self._executor.pipeline.history_window, 1)
        human, dialog, history = await store.open_turn(user_id, self._channel_type, window)
        if reward is not None:
            previous = next((u for u in reversed(history) if isinstance(u, BotUtterance)), None)
            if previous is not None:
                await store.rate_utterance(user_id, previous.utt_id, reward)
        utterance = HumanUtterance(text=text, user=human.model_dump(mode="json"),
                                   attributes=attributes)
        pending = self._unanswered(history, utterance)
        if pending is not None:
            history = history[:-1]
            utterance.utt_id, utterance.date_time = pending.utt_id, pending.date_time
        turn_identified(dialog.dialog_id, utterance.utt_id)
        if pending is None:
            await store.add_utterance(dialog.dialog_id, utterance)
        result = await self._executor.run(
            Turn(dialog.dialog_id, human, dialog.bot, history, utterance))
        await self._finish(dialog.dialog_id, human.id, result)
        if close_after:
            await store.close_active_dialog(user_id)
        return result, dialog.dialog_id

    def _unanswered(self, history: list[Utterance],
                    utterance: HumanUtterance) -> HumanUtterance | None:
        """The stored, unanswered utterance this message repeats, if it is one."""
        last = history[-1] if history else None
        if (isinstance(last, HumanUtterance) and last.text == utterance.text
                and last.attributes == utterance.attributes
                and utterance.date_time - last.date_time <= self._retry_window):
            return last
        return None

    async def _finish(self, dialog_id: str, human_id: str, result: TurnResult) -> None:
        try:
            await self._store.finish_turn(
                dialog_id, human_id, result.utterance, result.bot_utterance,
                result.human_attributes, result.bot_attributes,
                human_profile=result.human_profile,
                replace_human_attributes=result.replace_human_attributes)
        except StoreWriteRefused as exc:
            log.error("dialog %s: the finished turn was refused (%s); storing it without "
                      "the services' outputs", dialog_id, exc)
            utterance, bot_utterance = result.without_outputs(str(exc))
            await self._store.finish_turn(dialog_id, human_id, utterance, bot_utterance, {}, {})
