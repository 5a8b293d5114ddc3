"""What the candidate's pipeline file changes, against the pipeline it is compared with.

The store does not keep the pipeline a turn ran through, so the baseline is a file: the
one the agent runs (``CHORUS_PIPELINE``, ``pipeline.json`` by default) unless
``--baseline`` names another. The two documents are compared value by value, each value
named by its path (``services.skills.faq.connector.timeout``), so a reader of the report
sees that a skill was removed or a threshold moved without opening either file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: What a path holds on a side that does not have it.
ABSENT = "(absent)"


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    baseline: str
    candidate: str


def _shown(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _differences(baseline: object, candidate: object, path: str, into: list[Change]) -> None:
    if isinstance(baseline, dict) and isinstance(candidate, dict):
        for key in sorted(baseline.keys() | candidate.keys(), key=str):
            inner = f"{path}.{key}" if path else str(key)
            if key not in candidate:  # a whole entry removed is one change, not one a value
                into.append(Change(inner, _shown(baseline[key]), ABSENT))
            elif key not in baseline:
                into.append(Change(inner, ABSENT, _shown(candidate[key])))
            else:
                _differences(baseline[key], candidate[key], inner, into)
    elif baseline != candidate:  # a list is one value: its order matters, its items unnamed
        into.append(Change(path or "(the whole file)", _shown(baseline), _shown(candidate)))


def config_diff(baseline: object, candidate: object) -> list[Change]:
    """Each value that differs between the two documents, by its path, in path order; an
    entry only one side has is one change, with its whole value."""
    found: list[Change] = []
    _differences(baseline, candidate, "", found)
    return found
