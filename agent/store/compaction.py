"""What compaction keeps of a stored turn, the same on every store."""

from __future__ import annotations

from typing import Any


def compacted(doc: dict[str, Any], chosen_skill: str | None) -> dict[str, Any] | None:
    """The utterance without its bulky parts, or None when it has none left. A human
    utterance keeps the hypothesis its answer came from (the first of its skill)."""
    if doc.get("speaker") == "bot":
        if not doc.get("annotations"):
            return None
        return {**doc, "annotations": {}}
    hypotheses = doc.get("hypotheses") or []
    chosen = [h for h in hypotheses if isinstance(h, dict) and h.get("skill_name") == chosen_skill]
    kept = [{**chosen[0], "annotations": {}}] if chosen else []
    if (
        not doc.get("annotations")
        and not doc.get("trace")
        and not doc.get("errors")
        and not doc.get("skill_selection")
        and hypotheses == kept
    ):
        return None
    return {
        **doc,
        "annotations": {},
        "trace": [],
        "errors": [],
        "skill_selection": [],
        "hypotheses": kept,
    }
