"""Tiers, and streams held until they are sure: what lets a turn answer at a cheap skill's
speed when a cheap skill is confident, and pay for an LLM only when none is (within its
token budgets: :mod:`agent.pipeline.budgets`).

A skill of tier 0 runs as every skill always did. A skill of a higher tier waits for the
lower tiers and runs only when none of their hypotheses reached its ``run_below``; a
``speculative`` one starts with tier 0 instead and is dropped the moment such a
hypothesis arrives. The executor (:mod:`agent.pipeline.executor`) applies the rules; this
module holds the pieces it keeps per turn and per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.pipeline.graph import ServiceNode
from agent.telemetry.turn_events import TurnListener


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
    #: the turn's listener (its tokens are held only when someone follows the turn)
    events: TurnListener
    confidence: float | None = None
    sure: bool = False
    held: list[str] = field(default_factory=list)

    def offer(self, text: str) -> bool:
        """Hold ``text`` for the listener, or pass it on with those held when the answer
        is sure; whether it was passed on."""
        if not self.events.listened:
            return False
        self.held.append(text)
        if self.sure:
            self.flush()
        return self.sure

    def flush(self) -> None:
        for text in self.held:
            self.events.emit("token", text=text, skill=self.skill)
        self.held.clear()
