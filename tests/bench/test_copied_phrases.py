"""``bench/copied_phrases.py`` lists the turns of a new routing set that repeat a phrase
the skills were built from, and shows its blind writer nothing else of those files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.copied_phrases import copied, main, quoted_phrases, sources
from bench.routing import load_set


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with an intents file, a skill's README and a test quoting phrases."""
    _write(
        tmp_path / "annotators/intents/intents.json",
        json.dumps({"abilities": {"examples": ["what are you able to do", "help"]}}),
    )
    _write(
        tmp_path / "skills/smalltalk/README.md",
        'A joke when asked ("spin me a yarn, robot"), thanks ("thank you") and a secret line\n'
        '"the moon is cheese".\n',
    )
    _write(tmp_path / "tests/test_x.py", 'TURN = "my cat sleeps on the radiator"\n')
    return tmp_path


def _set(path: Path, turns: list[str]) -> Path:
    line = {"id": "new-001", "turns": [{"user": turn, "fits": ["llm"]} for turn in turns]}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


def test_a_copied_turn_is_listed_with_its_file_and_an_own_one_is_not(repo: Path) -> None:
    turns = [
        "What are you able to do?",  # an intent's example, in other capitals
        "ok spin me a yarn, robot!",  # a skill's quoted phrase inside the turn
        "sleeps on the radiator",  # a piece of a test's sentence
        "help",  # one word: a bare opener may repeat
        "can you help me choose a tent",  # shares only one quoted word
        "thank you for the directions",  # holds a two-word phrase: shared by chance
    ]
    found = copied(load_set(_set(repo / "new.jsonl", turns)), quoted_phrases(repo, sources(repo)))
    assert [(turn.user, turn.how) for turn in found] == [
        ("What are you able to do?", ["the same as a string of annotators/intents/intents.json"]),
        ("ok spin me a yarn, robot!", ["holds a 5-word string of skills/smalltalk/README.md"]),
        ("sleeps on the radiator", ["is inside a string of tests/test_x.py"]),
    ]


def test_the_report_shows_the_set_s_turns_and_never_the_files_text(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The writer of a held-out set must not read other phrases: only the matching turn of
    the set and the file's name are printed, and the count."""
    path = _set(repo / "new.jsonl", ["my cat sleeps on the radiator", "where is my umbrella"])
    assert main([str(path), "--root", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "'my cat sleeps on the radiator'" in out
    assert "tests/test_x.py" in out
    assert "umbrella" not in out
    assert "moon is cheese" not in out
    assert "spin me a yarn" not in out
    assert out.rstrip().endswith("1 of the set's turns repeat a quoted phrase")
