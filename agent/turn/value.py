"""One turn as both pipeline kinds see it: what it starts from and what it ends with.

The message flow builds a :class:`Turn`, an executor of either kind (Chorus's own or
dp-agent's) returns a :class:`TurnResult`, and the store writes it; none of them needs to
know which kind ran it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.state.models import Bot, BotUtterance, Human, HumanUtterance, ServiceFailure, Utterance
from agent.telemetry.turn_events import UNHEARD, TurnListener


@dataclass
class Turn:
    """What a turn starts from: the stored window and the new, already stored, utterance."""

    dialog_id: str
    human: Human
    bot: Bot
    history: list[Utterance]
    utterance: HumanUtterance
    #: the experiment arm the dialog is stored on (None: opened with no experiment)
    arm: str | None = None
    #: who follows the turn live: the executor reports each call's end (and a sure
    #: answer's tokens) on it; :data:`~agent.telemetry.turn_events.UNHEARD` when nobody does
    events: TurnListener = field(default=UNHEARD, compare=False, repr=False)


@dataclass
class TurnResult:
    """The finished turn: what to store and what to answer."""

    utterance: HumanUtterance
    bot_utterance: BotUtterance
    human_attributes: dict[str, Any] = field(default_factory=dict)
    bot_attributes: dict[str, Any] = field(default_factory=dict)
    chosen: int | None = None
    #: dp-agent pipelines: profile fields to merge, and whether ``human_attributes``
    #: replace the user's attributes (the reset on a dialog's first turn)
    human_profile: dict[str, Any] = field(default_factory=dict)
    replace_human_attributes: bool = False

    def without_outputs(self, why: str) -> tuple[HumanUtterance, BotUtterance]:
        """The turn as stored when the database refused it whole: the texts, the errors
        (this refusal among them) and the trace, without what the services sent."""
        utterance = self.utterance.model_copy(
            update={
                "annotations": {},
                "hypotheses": [],
                "errors": [
                    *self.utterance.errors,
                    ServiceFailure(
                        service="store",
                        kind="refused",
                        message=f"the services' outputs could not be stored: {why}",
                    ),
                ],
            }
        )
        bot = self.bot_utterance
        bot_utterance = BotUtterance(
            utt_id=bot.utt_id,
            text=bot.text,
            orig_text=bot.orig_text,
            active_skill=bot.active_skill,
            confidence=bot.confidence,
            date_time=bot.date_time,
        )
        return utterance, bot_utterance

    def ranked_texts(self) -> list[str]:
        """Every surviving hypothesis' text, the chosen one first, then by confidence."""
        hypotheses = self.utterance.hypotheses
        rest = sorted(
            (h for i, h in enumerate(hypotheses) if i != self.chosen), key=lambda h: -h.confidence
        )
        first = [hypotheses[self.chosen]] if self.chosen is not None else []
        return [h.text for h in [*first, *rest]]
