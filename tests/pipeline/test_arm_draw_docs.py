"""docs/experiments.md states the arms' draw exactly: its Python, run as the docs print it,
draws the arm the agent draws for every user, with ``CHORUS_ARM_KEY`` and without, on
uneven weights and more than two arms."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.kinds import load_experiment
from agent.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"
KEY = "0123456789abcdef0123456789abcdef"
USERS = [f"user-{i}" for i in range(300)] + ["ann", "Zoë", "123456789", "tg:42"]

Draw = Callable[[str, str, list[tuple[str, float]], str | None], str]


def documented_draw() -> tuple[Draw, str]:
    """The docs' ``arm_for``, and what the block printed when it ran."""
    text = DOC.read_text(encoding="utf-8")
    blocks = [
        unindented(b)
        for b in re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)
        if "def arm_for(" in b[1]
    ]
    assert len(blocks) == 1, "docs/experiments.md lost the draw's Python"
    printed: list[str] = []
    namespace: dict[str, Any] = {"print": lambda *args: printed.append(" ".join(map(str, args)))}
    exec(blocks[0], namespace)
    draw: Draw = namespace["arm_for"]
    return draw, "\n".join(printed)


def unindented(block: tuple[str, str]) -> str:
    """A fenced block of a list item, without the item's indent."""
    indent, body = block
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


@pytest.mark.parametrize("arm_key", [KEY, None], ids=["with CHORUS_ARM_KEY", "without"])
@pytest.mark.parametrize(
    "weights",
    [{"control": 1, "candidate": 1}, {"a": 3, "b": 0.5, "c": 1.25}],
    ids=["two arms", "three uneven arms"],
)
def test_the_documented_draw_is_the_agents(
    tmp_path: Path, arm_key: str | None, weights: dict[str, float]
) -> None:
    for arm in weights:
        pipeline = {"services": {"skills": {"s": {"connector": {"url": "http://127.0.0.1:9/"}}}}}
        (tmp_path / f"{arm}.json").write_text(json.dumps(pipeline))
    path = tmp_path / "experiment.json"
    arms = [{"name": a, "pipeline": f"{a}.json", "weight": w} for a, w in weights.items()]
    path.write_text(json.dumps({"name": "candidate-vs-control", "arms": arms}))
    settings = Settings(arm_key=arm_key)
    experiment = load_experiment(path, window=3, turn_timeout=None, key=settings.arm_key_bytes())
    draw, _ = documented_draw()

    documented = [draw(u, experiment.name, list(weights.items()), arm_key) for u in USERS]

    assert documented == [experiment.arm_for(user) for user in USERS]
    assert set(documented) == set(weights)  # every arm drawn: the comparison tells


def test_the_documented_example_prints_an_arm() -> None:
    _, printed = documented_draw()
    assert printed in {"control", "candidate"}
