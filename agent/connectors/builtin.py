"""Services that run inside the agent behind the same connector protocol.

They keep the default pipeline short: without a skill selector every skill runs, and
without a response selector the most confident hypothesis answers.
"""

from __future__ import annotations

from typing import Any

from agent.sdk.models import DialogView, Selection


def choose_highest_confidence(view: DialogView) -> Selection:
    """The first of the most confident hypotheses (ties go to the earlier skill)."""
    hypotheses = view.human_utterance.hypotheses
    if not hypotheses:
        raise ValueError("no hypotheses to choose from")
    best = max(range(len(hypotheses)), key=lambda i: (hypotheses[i].confidence, -i))
    return Selection(index=best, reason=f"highest confidence ({hypotheses[best].confidence:.2f})")


class HighestConfidenceSelector:
    """Built-in response selector ``highest_confidence``."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def call(self, views: list[DialogView]) -> list[Any]:
        return [choose_highest_confidence(v).model_dump() for v in views]

    async def aclose(self) -> None:
        return None


class AllSkillsSelector:
    """Built-in skill selector ``all_skills``: an empty choice means every skill runs."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def call(self, views: list[DialogView]) -> list[Any]:
        return [[] for _ in views]

    async def aclose(self) -> None:
        return None
