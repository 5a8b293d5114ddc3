"""Dialog views as the agent sends them, for testing services directly over HTTP."""

from __future__ import annotations

from typing import Any


def view(
    *texts: str,
    human_attributes: dict[str, Any] | None = None,
    hypotheses: list[dict[str, Any]] | None = None,
    dialog_id: str = "d1",
) -> dict[str, Any]:
    """Alternating human/bot utterances ending with the human's ``texts[-1]``."""
    speakers = ["human" if (len(texts) - i) % 2 else "bot" for i in range(len(texts))]
    utterances: list[dict[str, Any]] = [
        {
            "speaker": s,
            "utt_id": f"u{i}",
            "text": t,
            "annotations": {},
            "attributes": {},
            "hypotheses": [],
            "active_skill": "x" if s == "bot" else None,
        }
        for i, (s, t) in enumerate(zip(speakers, texts, strict=True))
    ]
    if hypotheses:
        utterances[-1]["hypotheses"] = hypotheses
    return {
        "dialog_id": dialog_id,
        "utterances": utterances,
        "human": {"id": "h1", "attributes": human_attributes or {}, "profile": {}},
        "bot": {"id": "b1", "attributes": {}, "persona": {}},
    }
