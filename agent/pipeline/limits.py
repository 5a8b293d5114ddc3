"""The storage bounds, applied to what services send during a turn.

A service's output is measured before it touches the state: one that could not be stored
or read back (:mod:`agent.state.limits`) is refused, which costs only that service's
output. The chosen hypothesis' attribute merges are checked against what the profiles
already hold, so a user's attributes cannot grow without bound over many turns either.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from agent.connectors.errors import RefusedOutput
from agent.state.limits import StorageLimits, UnstorableValue
from agent.state.models import Bot, Human, Hypothesis, JsonDict, ServiceFailure

log = logging.getLogger("chorus.executor")


class TurnLimits:
    """:class:`StorageLimits` as the executor applies them."""

    def __init__(self, storage: StorageLimits) -> None:
        self.storage = storage

    def measure_output(self, service: str, output: Any) -> int:
        """The output's size as JSON, or :class:`RefusedOutput` saying which bound it broke."""
        try:
            return self.storage.measure(output, "output")
        except UnstorableValue as exc:
            raise RefusedOutput(service, f"cannot be stored: {exc}") from None

    def attribute_merges(self, chosen: Hypothesis | None, human: Human, bot: Bot,
                         errors: list[ServiceFailure]) -> tuple[JsonDict, JsonDict]:
        """The chosen hypothesis' ``human_attributes`` and ``bot_attributes``, each dropped
        (and the refusal recorded) when merging it would overfill the profile."""
        if chosen is None:
            return {}, {}
        merges = []
        for side, current, updates in (("human", human.attributes, chosen.human_attributes),
                                       ("bot", bot.attributes, chosen.bot_attributes)):
            problem = self._overfills(current, updates) if updates else None
            if problem is not None:
                log.warning("skill %s: %s_attributes not merged: %s", chosen.skill_name, side,
                            problem)
                errors.append(ServiceFailure(
                    service=chosen.skill_name, kind="refused",
                    message=f"{side}_attributes not merged: {problem}"))
                updates = {}
            merges.append(dict(updates))
        return merges[0], merges[1]

    def _overfills(self, current: JsonDict, updates: JsonDict) -> str | None:
        limits = self.storage
        keys = len(current.keys() | updates.keys())
        if keys > limits.max_attribute_keys:
            return (f"the attributes would hold {keys} keys; the limit is "
                    f"{limits.max_attribute_keys} (CHORUS_MAX_ATTRIBUTE_KEYS)")
        merged = {**current, **updates}
        try:
            replace(limits, max_bytes=limits.max_document_bytes).measure(merged, "attributes")
        except UnstorableValue as exc:
            return str(exc)
        return None
