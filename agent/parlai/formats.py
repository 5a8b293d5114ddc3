"""ParlAI's dialog formats: the tab-separated text format and JSONL, read and written.

Text format (ParlAI's ``ParlAIDialogTeacher``): one example per line, ``field:value``
pairs separated by tabs; list fields (``labels``, ``eval_labels``, ``label_candidates``,
``text_candidates``) separate their items with ``|``; ``episode_done:True`` ends an
episode. Tabs, newlines and pipes inside values are escaped as ``\\t``, ``\\n`` and
``__PIPE__``. JSONL: one JSON object per line with the same fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agent.sdk.errors import ChorusError

LIST_FIELDS = frozenset({"labels", "eval_labels", "label_candidates", "text_candidates"})
Example = dict[str, Any]
Episode = list[Example]


class DatasetError(ChorusError, ValueError):
    """A line of a dataset file cannot be read; the message gives the file and line."""


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace("\\t", "\t")


def _escape(value: str) -> str:
    return value.replace("\t", "\\t").replace("\n", "\\n")


def _parse_value(key: str, raw: str) -> Any:
    if key in LIST_FIELDS:
        return [_unescape(item).replace("__PIPE__", "|") for item in raw.split("|")]
    if key == "episode_done":
        return raw.strip().lower() == "true"
    if key == "reward":
        return float(raw)
    return _unescape(raw)


def parse_text_line(line: str) -> Example:
    example: Example = {}
    for field in line.rstrip("\n").split("\t"):
        if not field:
            continue
        key, sep, raw = field.partition(":")
        if not sep:
            raise ValueError(f"field {field[:40]!r} has no 'name:' prefix")
        example[key] = _parse_value(key, raw)
    return example


def format_text_line(example: Example) -> str:
    fields = []
    for key, value in example.items():
        if key in LIST_FIELDS:
            value = "|".join(_escape(str(v)).replace("|", "__PIPE__") for v in value)
        elif isinstance(value, bool):
            value = str(value)
        else:
            value = _escape(str(value))
        fields.append(f"{key}:{value}")
    return "\t".join(fields)


def _examples(path: Path) -> Iterator[Example]:
    is_jsonl = path.suffix in {".jsonl", ".json"}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                example = json.loads(line) if is_jsonl else parse_text_line(line)
                if not isinstance(example, dict) or not isinstance(example.get("text"), str):
                    raise ValueError("an example needs a 'text' field")
            except ValueError as exc:
                raise DatasetError(f"{path}:{number}: {exc}") from None
            yield example


def read_episodes(path: Path) -> list[Episode]:
    """The file's episodes; a trailing episode without ``episode_done`` still counts."""
    episodes: list[Episode] = []
    current: Episode = []
    for example in _examples(path):
        current.append(example)
        if example.get("episode_done"):
            episodes.append(current)
            current = []
    if current:
        episodes.append(current)
    return episodes


def write_episodes(episodes: Iterable[Episode], path: Path) -> int:
    """Write episodes in the format the suffix names (``.jsonl`` or text); lines written."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for episode in episodes:
            for example in episode:
                line = (
                    json.dumps(example, ensure_ascii=False)
                    if path.suffix == ".jsonl"
                    else format_text_line(example)
                )
                out.write(line + "\n")
                count += 1
    return count
