"""Labelled turns: which skills may answer a turn, so that a diff becomes a verdict.

A changed turn says only that the candidate answers otherwise. With a label (the skills
an operator says may answer the turn: ``faq``, ``llm``, ``fallback``...), each side of the
turn fits it or not, and a run counts the changed turns that now fit their label and those
that no longer do. Labels come from a file (``--labels``, JSON Lines or CSV), naming each
turn by its utterance id, by its dialog and place in it, or by what the user said (every
turn where that was said), or from the turn itself: the ``skill_labels`` attribute of the
human utterance, which a client sends as an extra key of ``POST /``. The file's label wins
over the stored one, an utterance id over a dialog's turn, and that over the text.

``fallback`` fits both ways a turn falls back: the ``fallback`` skill answered, or no
hypothesis survived and the pipeline's fallback response did.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cli.replay.analysis import changed, said
from agent.cli.replay.compare import LabelCounts, Side, TurnDiff
from agent.sdk.errors import ChorusError

#: The human utterance's attribute that labels its turn when no file does.
STORED_LABEL = "skill_labels"
#: The label that fits both ways a turn falls back (see the module's docstring).
FALLBACK = "fallback"
#: The columns of a CSV label file; a JSON Lines file's keys are the same.
COLUMNS = ("utt_id", "dialog_id", "turn", "text", "skills")


class LabelError(ChorusError, ValueError):
    """A label file that cannot be read, or that names a turn the store does not hold."""


@dataclass(slots=True)
class Labels:
    """A label file read: the skills of each turn it names, and the line naming it."""

    path: str
    by_utterance: dict[str, tuple[frozenset[str], int]] = field(default_factory=dict)
    by_turn: dict[tuple[str, int], tuple[frozenset[str], int]] = field(default_factory=dict)
    by_text: dict[str, tuple[frozenset[str], int]] = field(default_factory=dict)

    def of(self, diff: TurnDiff) -> frozenset[str] | None:
        for found in (
            self.by_utterance.get(diff.utt_id),
            self.by_turn.get((diff.dialog_id, diff.turn)),
            self.by_text.get(said(diff.text)),
        ):
            if found is not None:
                return found[0]
        return None


def _skills(value: Any, where: str) -> frozenset[str]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split("|")]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(s, str) and s.strip() for s in value)
    ):
        raise LabelError(
            f"{where}: 'skills' must name at least one skill (a list of names, or names "
            "separated by '|')"
        )
    return frozenset(s.strip() for s in value)


def _record(labels: Labels, record: dict[str, Any], line: int) -> None:
    """Adds one line's label; a line names its turn one way only, and once."""
    where = f"--labels {labels.path}, line {line}"
    unknown = sorted(set(record) - set(COLUMNS))
    if unknown:
        raise LabelError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(COLUMNS)})")
    keys = {k: v for k, v in record.items() if k != "skills" and v not in (None, "")}
    skills = _skills(record.get("skills"), where)
    if set(keys) == {"utt_id"}:
        table: dict[Any, tuple[frozenset[str], int]] = labels.by_utterance
        key: Any = str(keys["utt_id"])
    elif set(keys) == {"dialog_id", "turn"}:
        try:
            number = int(keys["turn"])
        except (TypeError, ValueError):
            number = 0
        if number < 1 or isinstance(keys["turn"], bool | float):
            raise LabelError(f"{where}: 'turn' must be the turn's place in its dialog, from 1")
        table, key = labels.by_turn, (str(keys["dialog_id"]), number)
    elif set(keys) == {"text"} and isinstance(keys["text"], str):
        table, key = labels.by_text, said(keys["text"])
    else:
        raise LabelError(
            f"{where}: name the turn by 'utt_id', by 'dialog_id' and 'turn', or by 'text', "
            "one of them"
        )
    if key in table:
        raise LabelError(f"{where}: this turn is labelled already, on line {table[key][1]}")
    table[key] = (skills, line)


def _csv_records(lines: Iterable[str], path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(lines)
    if reader.fieldnames is None or "skills" not in reader.fieldnames:
        raise LabelError(
            f"--labels {path}, line 1: a CSV label file starts with a header naming its "
            f"columns, 'skills' and the turn's ({', '.join(COLUMNS[:-1])})"
        )
    for row in reader:
        if None in row:
            raise LabelError(f"--labels {path}, line {reader.line_num}: more cells than columns")
        if any(value for value in row.values()):
            yield reader.line_num, dict(row)


def _jsonl_records(lines: Iterable[str], path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelError(f"--labels {path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise LabelError(f"--labels {path}, line {number}: not a JSON object")
        yield number, record


def read_labels(path: Path) -> Labels:
    """The label file at ``path``: CSV when its name ends in ``.csv``, else JSON Lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelError(f"--labels {path}: cannot be read ({exc})") from None
    labels = Labels(str(path))
    read = _csv_records if path.suffix.lower() == ".csv" else _jsonl_records
    for line, record in read(text.splitlines(keepends=True), str(path)):
        _record(labels, record, line)
    return labels


def check_known(labels: Labels, turns: Iterable[tuple[str, str, int]]) -> None:
    """Refuses a file naming a turn (by utterance id, or dialog and place) that is not
    among ``turns`` (each turn's dialog id, utterance id and place), naming its line. A
    text names no turn in particular: it labels whichever turns said it, if any."""
    utterances, places = set(), set()
    for dialog_id, utt_id, number in turns:
        utterances.add(utt_id)
        places.add((dialog_id, number))
    missing = [
        (line, f"utterance {utt_id!r}")
        for utt_id, (_, line) in labels.by_utterance.items()
        if utt_id not in utterances
    ] + [
        (line, f"turn {number} of dialog {dialog_id!r}")
        for (dialog_id, number), (_, line) in labels.by_turn.items()
        if (dialog_id, number) not in places
    ]
    if missing:
        line, turn = min(missing)
        more = f" (and {len(missing) - 1} more lines)" if len(missing) > 1 else ""
        raise LabelError(
            f"--labels {labels.path}, line {line}: the store holds no answered {turn}{more}"
        )


def stored_label(attributes: dict[str, Any]) -> list[str] | None:
    """The label a turn was stored with (its ``skill_labels`` attribute), if it is one."""
    value = attributes.get(STORED_LABEL)
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(s, str) and s for s in value):
        return sorted(set(value))
    return None


def fits(label: Sequence[str], side: Side) -> bool:
    return side.skill in label or (FALLBACK in label and side.fallback)


def label_turn(diff: TurnDiff, labels: Labels | None) -> None:
    """Sets the turn's label (the file's, else the stored one) and whether each side fits it."""
    found = labels.of(diff) if labels is not None else None
    if found is not None:
        diff.label = sorted(found)
    if diff.label is not None:
        diff.stored_fits = fits(diff.label, diff.stored)
        diff.candidate_fits = fits(diff.label, diff.candidate)


def count_labels(diffs: Sequence[TurnDiff]) -> LabelCounts | None:
    """The labelled turns' counts, or None when no replayed turn has a label."""
    labelled = [d for d in diffs if d.label is not None]
    if not labelled:
        return None
    moved = [d for d in labelled if changed(d)]
    return LabelCounts(
        labelled=len(labelled),
        stored_fit=sum(bool(d.stored_fits) for d in labelled),
        candidate_fit=sum(bool(d.candidate_fits) for d in labelled),
        now_fit=sum(bool(d.candidate_fits) and not d.stored_fits for d in moved),
        no_longer_fit=sum(bool(d.stored_fits) and not d.candidate_fits for d in moved),
    )
