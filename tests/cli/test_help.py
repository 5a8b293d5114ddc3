"""`chorus ... --help` reads as the docs do: whole sentences, no type tags such as <bool>,
and no summary cut off mid-sentence in the command lists."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agent.cli.main import app


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``group`` (typer's own click), by its words after ``chorus``."""
    yield path, group
    for name, command in getattr(group, "commands", {}).items():
        yield from commands(command, (*path, name))


COMMANDS = dict(commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(("chorus", *p)))
def test_help_is_whole_sentences(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    # The command lists' summaries (Click cuts one it cannot fit with "..."); a usage line
    # ends with "..." where the command takes several paths (`chorus knowledge build`).
    listing = result.output.split("Commands:")[1] if "Commands:" in result.output else ""
    assert "..." not in listing, "a summary was cut short"
    command = COMMANDS[path]
    for param in command.params:
        text = getattr(param, "help", None)
        if text is None:
            continue
        assert text[0].isupper(), f"{param.name}: {text!r} starts a sentence"
        assert text.rstrip().endswith("."), f"{param.name}: {text!r} ends a sentence"
    summary = (command.help or "").strip().split("\n\n")[0]
    assert summary.endswith("."), f"{path}: {summary!r}"
