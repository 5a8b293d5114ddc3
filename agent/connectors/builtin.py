"""Services that run inside the agent behind the same connector protocol.

They keep the default pipeline short: without a skill selector every skill runs, and
without a response selector the most confident hypothesis answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.connectors.base import Connector
from agent.sdk.models import DialogView, Selection


def highest_confidence(confidences: Sequence[float]) -> Selection:
    """The first of the most confident hypotheses (ties go to the earlier skill)."""
    if not confidences:
        raise ValueError("no hypotheses to choose from")
    best = max(range(len(confidences)), key=lambda i: (confidences[i], -i))
    return Selection(index=best, reason=f"highest confidence ({confidences[best]:.2f})")


def choose_highest_confidence(view: DialogView) -> Selection:
    return highest_confidence([h.confidence for h in view.human_utterance.hypotheses])


class HighestConfidenceSelector(Connector[DialogView]):
    """Built-in response selector ``highest_confidence``."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def call(self, views: list[DialogView]) -> list[Any]:
        return [choose_highest_confidence(v).model_dump() for v in views]


class AllSkillsSelector(Connector[DialogView]):
    """Built-in skill selector ``all_skills``: an empty choice means every skill runs."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def call(self, views: list[DialogView]) -> list[Any]:
        return [[] for _ in views]
