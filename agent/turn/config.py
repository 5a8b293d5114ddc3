"""What both pipeline kinds' files say alike: the dialect their clients speak, the
double-texting policy, the handoff section, the one error a bad file raises, and the order
services run in. Each kind's own file format (:mod:`agent.pipeline.config`,
:mod:`agent.dream.config`) builds on these, so neither kind imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, model_validator

from agent.sdk.errors import ConfigError

#: What a message does when it arrives while an earlier one of its user is being answered
#: (docs/turns.md): wait its turn, be refused (409), or cancel the running turn.
#: Whose clients a pipeline's file is written for: what ``POST /`` answers and the dialog
#: view default to (``dp-agent``: its shapes, as Dream's clients and tools read them).
Dialect = Literal["chorus", "dp-agent"]
DoubleTexting = Literal["enqueue", "reject", "interrupt"]


class PipelineConfigError(ConfigError):
    """The pipeline file cannot run; the message names the entry to fix."""


#: The hypothesis field a skill sets to hand the dialog to a person: ``true``, or a
#: string saying why (docs/handoff.md).
HANDOFF_FIELD = "handoff"


class HandoffConfig(BaseModel):
    """``handoff``: dialogs may be handed to a person (docs/handoff.md); absent, they
    never are, and the operator routes answer 409 saying so."""

    model_config = ConfigDict(extra="forbid")

    announce: str = Field(
        default="I'm passing you to a person; they will answer here shortly.",
        min_length=1,
        max_length=4096,
        description="what the user is told when a person is asked for (replaces the text "
        "of a skill's answer that asked for one)",
    )
    taken_back: str = Field(
        default="No one could take over in time, so I'm back. How can I help?",
        min_length=1,
        max_length=4096,
        description="what the user is told when no operator claimed the dialog in time",
    )
    unclaimed_after: float = Field(
        default=300.0,
        gt=0,
        le=7 * 86400,
        description="seconds a dialog waits for an operator before the bot takes it back",
    )
    webhook: AnyHttpUrl | None = Field(
        default=None,
        description="a helpdesk's URL each handoff's events are POSTed to, signed with "
        "CHORUS_OPERATOR_KEY (docs/api.md, the helpdesk webhook)",
    )
    patterns: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="regular expressions (case-insensitive, searched in the user's text): "
        "a message matching one is handed to a person without calling any service",
    )

    @model_validator(mode="after")
    def _patterns_compile(self) -> HandoffConfig:
        for index, pattern in enumerate(self.patterns):
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"patterns.{index}: not a regular expression: {exc}") from None
        return self

    def matching(self, text: str) -> str | None:
        """The first pattern found in ``text``; None when none is."""
        for pattern in self.patterns:
            if re.search(pattern, text, re.IGNORECASE):
                return pattern
        return None


def topological_order(deps: Mapping[str, set[str]], where: Callable[[str], str]) -> list[str]:
    """Every service after what it waits for (Kahn's algorithm); what is left over sits on a
    cycle, which the error spells out with ``where(name)`` for each service on it. Both
    pipeline kinds (:mod:`agent.pipeline.graph`, :mod:`agent.dream.graph`) order their
    services here."""
    order: list[str] = []
    waiting = {name: set(d) for name, d in deps.items()}
    while waiting:
        ready = sorted(n for n, d in waiting.items() if not d)
        if not ready:
            cycle = _find_cycle(waiting)
            raise PipelineConfigError(
                "cycle in the pipeline: " + " -> ".join(where(n) for n in cycle)
            )
        for name in ready:
            order.append(name)
            del waiting[name]
        for d in waiting.values():
            d.difference_update(ready)
    return order


def _find_cycle(waiting: dict[str, set[str]]) -> list[str]:
    """One cycle among services that all wait for one another, first name first."""
    start = min(waiting)
    path = [start]
    while True:
        nxt = min(d for d in waiting[path[-1]] if d in waiting)
        if nxt in path:
            return [*path[path.index(nxt) :], nxt]
        path.append(nxt)
