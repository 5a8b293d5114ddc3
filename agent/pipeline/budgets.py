"""Token budgets: how many tokens an LLM skill may spend per call, dialog, user and day, as
its service reports them (OpenAI's ``usage``).

A call is admitted, or skipped, when it is about to be made, and then it holds a
:class:`Reservation` of its allowance (the most it may spend: the view's ``max_tokens``)
against the day's count at once, so turns running together cannot all see the same
tokens left; when the call ends, whichever way, the hold is released and what it really
spent is counted (:meth:`TokenLedger.settle`). Where each count lives:

- per day: in this process (each agent replica counts its own day);
- per dialog: the dialog's bot attribute :data:`TOKENS_KEY`, written with the turn;
- per user: the human's attribute :data:`USER_TOKENS_KEY`, the same for every dialog of
  the user (``/start`` opens a new dialog, not a new budget), counted per UTC day.

A user's turns run one at a time (the user's queue), so the dialog's and the user's counts,
read from the stored state, need no hold of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from agent.pipeline.graph import ServiceNode

#: The bot attribute holding the tokens each skill spent in the dialog: the dialog's own
#: record, so a per-dialog budget holds across agent restarts and replicas.
TOKENS_KEY = "tokens_spent"
#: The human attribute holding the tokens each skill spent for the user on one UTC day:
#: ``{"day": "2026-11-28", "skills": {"llm": 120}}``, across all the user's dialogs.
USER_TOKENS_KEY = "tokens_spent_today"


def _today() -> date:
    return datetime.now(UTC).date()


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(slots=True)
class Reservation:
    """One admitted call: the most it may spend, and what it holds of the day's count."""

    skill: str
    allowance: int
    held: int
    day: date
    settled: bool = False


class TokenLedger:
    """Tokens each skill spent and holds (module docstring)."""

    def __init__(self, today: Callable[[], date] = _today) -> None:
        self._today = today
        self._day = today()
        self._spent_today: dict[str, int] = {}
        self._held_today: dict[str, int] = {}

    def _roll(self) -> date:
        day = self._today()
        if day != self._day:
            self._day, self._spent_today, self._held_today = day, {}, {}
        return day

    def today(self, skill: str) -> int:
        """Tokens the skill spent today in this process, and those its calls in flight hold."""
        self._roll()
        return self._spent_today.get(skill, 0) + self._held_today.get(skill, 0)

    @staticmethod
    def in_dialog(skill: str, bot_attributes: dict[str, Any]) -> int:
        spent = bot_attributes.get(TOKENS_KEY)
        return _count(spent.get(skill)) if isinstance(spent, dict) else 0

    def by_user(self, skill: str, human_attributes: dict[str, Any]) -> int:
        """Tokens the skill spent for the user today, over all their dialogs."""
        record = human_attributes.get(USER_TOKENS_KEY)
        if not isinstance(record, dict) or record.get("day") != self._roll().isoformat():
            return 0
        skills = record.get("skills")
        return _count(skills.get(skill)) if isinstance(skills, dict) else 0

    def reserve(
        self, node: ServiceNode, bot_attributes: dict[str, Any], human_attributes: dict[str, Any]
    ) -> Reservation | str:
        """The call's allowance, held from the day's count at once; or why the skill may
        not be called (a budget it has used up)."""
        budget = node.config.budget
        assert budget is not None
        name = node.name
        limits = [
            (budget.per_turn, 0, "per call"),
            (budget.per_dialog, self.in_dialog(name, bot_attributes), "per dialog"),
            (budget.per_user, self.by_user(name, human_attributes), "per user a day"),
            (budget.per_day, self.today(name), "per day"),
        ]
        left = []
        for limit, spent, what in limits:
            if limit is None:
                continue
            if spent >= limit:
                held = self._held_today.get(name, 0) if what == "per day" else 0
                holding = f" ({held} held by calls in flight)" if held else ""
                return f"token budget spent: {spent} of {limit} {what}{holding}"
            left.append(limit - spent)
        allowance = min(left)
        held = allowance if budget.per_day is not None else 0
        self._held_today[name] = self._held_today.get(name, 0) + held
        return Reservation(name, allowance, held, self._day)

    def settle(self, reservation: Reservation, used: int) -> None:
        """The call ended, whichever way: its hold is released and ``used`` counted in the
        day (a call settles once)."""
        if reservation.settled:
            return
        reservation.settled = True
        skill = reservation.skill
        if self._roll() == reservation.day:
            self._held_today[skill] = self._held_today.get(skill, 0) - reservation.held
        self._spent_today[skill] = self._spent_today.get(skill, 0) + used

    def recorded(
        self,
        bot_attributes: dict[str, Any],
        human_attributes: dict[str, Any],
        tokens: dict[str, int],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A turn's tokens as the bot and human attribute updates that record them in the
        dialog's and the user's counts (the day's is :meth:`settle`'s)."""
        previous = bot_attributes.get(TOKENS_KEY)
        dialog = dict(previous) if isinstance(previous, dict) else {}
        day = self._roll().isoformat()
        user: dict[str, Any] = {}
        for skill, used in tokens.items():
            dialog[skill] = self.in_dialog(skill, bot_attributes) + used
            user[skill] = self.by_user(skill, human_attributes) + used
        record = human_attributes.get(USER_TOKENS_KEY)
        if isinstance(record, dict) and record.get("day") == day:
            kept = record.get("skills")
            user = {**(kept if isinstance(kept, dict) else {}), **user}
        return {TOKENS_KEY: dialog}, {USER_TOKENS_KEY: {"day": day, "skills": user}}
