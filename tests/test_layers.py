"""Imports point down the layers: a module may import its own layer and the ones below it,
never one above. This is the one place the order is declared.

An upward import is how a small change starts to ripple through the whole agent (the
connectors needing the pipeline, metrics needing the executor); this test names each one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parent.parent / "agent"

#: Top to bottom. A module belongs to the first layer with a prefix it starts with.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("command line", ("agent.cli",)),
    ("API and composition root", ("agent.api",)),
    (
        "message flow",
        (
            "agent.flow",
            "agent.lines",
            "agent.idempotency",
            "agent.leases",
            "agent.lifecycle",
        ),
    ),
    ("pipeline", ("agent.pipeline", "agent.dream")),
    ("connectors", ("agent.connectors",)),
    ("infrastructure", ("agent.metrics", "agent.telemetry", "agent.settings")),
    ("store", ("agent.store",)),
    ("state and messages", ("agent.state", "agent.message", "agent.parlai")),
    ("service SDK", ("agent.sdk", "agent")),
]

#: Upward imports known and accepted, as (importer, imported): none today.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def layer_of(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(AGENT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Every ``agent`` module the file imports, wherever the import statement is."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return [name for name in found if name == "agent" or name.startswith("agent.")]


def upward_imports() -> list[str]:
    problems = []
    for path in sorted(AGENT.rglob("*.py")):
        importer = _module_name(path)
        for imported in _imports(path):
            if layer_of(imported) < layer_of(importer) and (importer, imported) not in KNOWN_UPWARD:
                problems.append(
                    f"{importer} ({LAYERS[layer_of(importer)][0]}) imports "
                    f"{imported} ({LAYERS[layer_of(imported)][0]})"
                )
    return problems


def test_imports_point_down_the_layers() -> None:
    assert upward_imports() == []


def test_no_relative_imports_hide_from_the_check() -> None:
    relative = [
        str(path.relative_to(AGENT.parent))
        for path in AGENT.rglob("*.py")
        if any(
            isinstance(n, ast.ImportFrom) and n.level > 0
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    ]
    assert relative == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("agent.connectors.http", "agent.pipeline.graph"),
        ("agent.metrics", "agent.pipeline.executor"),
        ("agent.store.base", "agent.api.deps"),
    ],
)
def test_an_upward_import_is_caught(importer: str, imported: str) -> None:
    assert layer_of(imported) < layer_of(importer)


def test_every_module_has_a_layer() -> None:
    for path in AGENT.rglob("*.py"):
        layer_of(_module_name(path))
