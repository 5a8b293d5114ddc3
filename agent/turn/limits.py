"""The storage bounds, applied to what services send during a turn.

A service's output is measured before it touches the state: one that could not be stored
or read back (:mod:`agent.state.storage_limits`) is refused, which costs only that service's
output. The chosen hypothesis' attribute merges are checked against what the profiles
already hold, so a user's attributes cannot grow without bound over many turns either.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from agent.connectors.errors import ServiceError
from agent.sdk.models import JsonDict
from agent.state.models import Bot, Human, Hypothesis, ServiceFailure
from agent.state.storage_limits import StorageLimits, UnstorableValue
from agent.telemetry import printable

log = logging.getLogger("chorus.executor")


class RefusedOutput(ServiceError):
    """The output broke a rule of the state: it tried to write outside the service's own
    slot, or could not be stored within the storage bounds. Nothing of it is applied; the
    pipeline raises it, and like any :class:`ServiceError` it costs only that output."""

    kind = "refused"


class TurnLimits:
    """:class:`StorageLimits` as the executor applies them."""

    def __init__(self, storage: StorageLimits) -> None:
        self.storage = storage

    def charge(self, service: str, output: Any, spent: int) -> int:
        """The turn's stored bytes once ``output`` is added, or :class:`RefusedOutput` when
        it could not be stored (saying which bound it broke) or would take the utterance
        over its document budget."""
        try:
            size = self.storage.measure(output, "output")
        except UnstorableValue as exc:
            raise RefusedOutput(service, f"cannot be stored: {exc}") from None
        budget = self.storage.max_document_bytes
        if spent + size > budget:
            raise RefusedOutput(
                service,
                f"its output (about {size} bytes) would take the "
                f"turn's stored document over {budget} bytes "
                "(MAX_DOCUMENT_BYTES)",
            )
        return spent + size

    def attribute_merges(
        self, chosen: Hypothesis | None, human: Human, bot: Bot, errors: list[ServiceFailure]
    ) -> tuple[JsonDict, JsonDict]:
        """The chosen hypothesis' ``human_attributes`` and ``bot_attributes``, each dropped
        (and the refusal recorded) when merging it would overfill the profile."""
        if chosen is None:
            return {}, {}
        return (
            self.merge_or_refuse(
                "human_attributes",
                chosen.skill_name,
                human.attributes,
                chosen.human_attributes,
                errors,
            ),
            self.merge_or_refuse(
                "bot_attributes", chosen.skill_name, bot.attributes, chosen.bot_attributes, errors
            ),
        )

    def merge_or_refuse(
        self,
        what: str,
        service: str,
        current: JsonDict,
        updates: JsonDict,
        errors: list[ServiceFailure],
    ) -> JsonDict:
        """``updates`` if merging them into ``current`` stays within the bounds; else
        nothing, with the refusal recorded as ``service``'s error."""
        problem = self._overfills(current, updates) if updates else None
        if problem is None:
            return dict(updates)
        # ``service`` may be a name a selector made up (a Dream selector names the skill).
        log.warning("%s: %s not merged: %s", printable(service), what, printable(problem))
        errors.append(
            ServiceFailure(service=service, kind="refused", message=f"{what} not merged: {problem}")
        )
        return {}

    def _overfills(self, current: JsonDict, updates: JsonDict) -> str | None:
        limits = self.storage
        keys = len(current.keys() | updates.keys())
        if keys > limits.max_attribute_keys:
            return (
                f"the attributes would hold {keys} keys; the limit is "
                f"{limits.max_attribute_keys} (MAX_ATTRIBUTE_KEYS)"
            )
        merged = {**current, **updates}
        try:
            replace(limits, max_bytes=limits.max_document_bytes).measure(merged, "attributes")
        except UnstorableValue as exc:
            return str(exc)
        return None
