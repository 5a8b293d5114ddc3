"""Tiers, streams held until they are sure, and token budgets: what lets a turn answer at
a cheap skill's speed when a cheap skill is confident, and pay for an LLM only when none is.

A skill of tier 0 runs as every skill always did. A skill of a higher tier waits for the
lower tiers and runs only when none of their hypotheses reached its ``run_below``; a
``speculative`` one starts with tier 0 instead and is dropped the moment such a
hypothesis arrives. The executor (:mod:`agent.pipeline.executor`) applies the rules; this
module holds the pieces it keeps per turn and per process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from agent.pipeline.graph import ServiceNode
from agent.telemetry.events import emit

#: The bot attribute holding the tokens each skill spent in the dialog: the dialog's own
#: record, so a per-dialog budget holds across agent restarts and replicas.
TOKENS_KEY = "tokens_spent"


def lower_tiers(node: ServiceNode, skills: list[ServiceNode]) -> list[ServiceNode]:
    """The skills a tiered skill waits for (or races, when speculative)."""
    if not node.config.tier:
        return []
    return [other for other in skills if other.config.tier < node.config.tier]


@dataclass
class Streaming:
    """One streaming skill being read: its tokens are held until its answer is sure (or
    dropped with it), then passed to the turn's listener as they come."""

    skill: str
    listened: bool
    confidence: float | None = None
    sure: bool = False
    held: list[str] = field(default_factory=list)

    def offer(self, text: str) -> None:
        if not self.listened:
            return
        self.held.append(text)
        if self.sure:
            self.flush()

    def flush(self) -> None:
        for text in self.held:
            emit("token", text=text, skill=self.skill)
        self.held.clear()


def _today() -> date:
    return datetime.now(UTC).date()


class TokenLedger:
    """Tokens each skill spent: per dialog in the dialog's bot attributes
    (:data:`TOKENS_KEY`), per UTC day in this process (each agent replica counts its own)."""

    def __init__(self, today: Callable[[], date] = _today) -> None:
        self._today = today
        self._day = today()
        self._spent_today: dict[str, int] = {}

    def today(self, skill: str) -> int:
        day = self._today()
        if day != self._day:
            self._day, self._spent_today = day, {}
        return self._spent_today.get(skill, 0)

    @staticmethod
    def in_dialog(skill: str, bot_attributes: dict[str, Any]) -> int:
        spent = bot_attributes.get(TOKENS_KEY)
        used = spent.get(skill) if isinstance(spent, dict) else None
        return used if isinstance(used, int) and not isinstance(used, bool) else 0

    def allowance(self, node: ServiceNode, bot_attributes: dict[str, Any]) -> int | None:
        """The most tokens the skill may spend on this call (None: no budget)."""
        budget = node.config.budget
        if budget is None:
            return None
        left = [
            limit - spent
            for limit, spent in (
                (budget.per_turn, 0),
                (budget.per_dialog, self.in_dialog(node.name, bot_attributes)),
                (budget.per_day, self.today(node.name)),
            )
            if limit is not None
        ]
        return max(min(left), 1) if left else None

    def spent_out(self, node: ServiceNode, bot_attributes: dict[str, Any]) -> str | None:
        """Why the skill may not be called this turn: a budget it has used up."""
        budget = node.config.budget
        if budget is None:
            return None
        dialog = self.in_dialog(node.name, bot_attributes)
        if budget.per_dialog is not None and dialog >= budget.per_dialog:
            return f"token budget spent: {dialog} of {budget.per_dialog} per dialog"
        day = self.today(node.name)
        if budget.per_day is not None and day >= budget.per_day:
            return f"token budget spent: {day} of {budget.per_day} per day"
        return None

    def spend(self, bot_attributes: dict[str, Any], tokens: dict[str, int]) -> dict[str, Any]:
        """Count a turn's tokens; the bot attribute update that records them in the dialog."""
        previous = bot_attributes.get(TOKENS_KEY)
        spent = dict(previous) if isinstance(previous, dict) else {}
        for skill, used in tokens.items():
            self._spent_today[skill] = self.today(skill) + used
            spent[skill] = self.in_dialog(skill, bot_attributes) + used
        return {TOKENS_KEY: spent}
