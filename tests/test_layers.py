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
            "agent.queues",
            "agent.idempotency",
            "agent.leases",
            "agent.lifecycle",
            "agent.handoff",
        ),
    ),
    # The one place that knows both kinds of pipeline and tells them apart by the file.
    ("pipeline kind chosen", ("agent.kinds",)),
    # The two kinds of pipeline, side by side: neither imports the other (SIBLINGS).
    ("pipeline kinds", ("agent.pipeline", "agent.dream")),
    # What both kinds share: the turn, the executor's protocol, its schedule and limits.
    ("turn machinery", ("agent.turn",)),
    # Backup and import read and write through the store's narrow protocols.
    ("backup and import", ("agent.backup",)),
    ("connectors", ("agent.connectors",)),
    ("infrastructure", ("agent.metrics", "agent.telemetry", "agent.settings")),
    ("store", ("agent.store",)),
    ("state and messages", ("agent.state", "agent.message", "agent.parlai")),
    ("service SDK", ("agent.sdk",)),
    # The package itself (agent/__init__.py: its docstring and __version__), and nothing
    # under it: a new top-level module must be given its layer above.
    ("package root", ("agent",)),
]

#: Upward imports known and accepted, as (importer, imported): none today.
KNOWN_UPWARD: set[tuple[str, str]] = set()

#: Packages of one layer that never import one another: Chorus's own pipeline kind and
#: dp-agent's share :mod:`agent.turn`, and only :mod:`agent.kinds`, above both, knows both.
SIBLINGS: tuple[frozenset[str], ...] = (frozenset({"agent.pipeline", "agent.dream"}),)


#: Names that stand for that module alone, not for the modules under it.
EXACT = frozenset({"agent"})


def in_layer(module: str, name: str) -> bool:
    if name in EXACT:
        return module == name
    return module == name or module.startswith(name + ".")


def layer_of(module: str) -> int:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(in_layer(module, p) for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")


def _module_name(path: Path, root: Path = AGENT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Every ``agent`` module the file imports, wherever the import statement is."""
    return imports_in(path.read_text(encoding="utf-8"))


def imports_in(source: str) -> list[str]:
    """Every ``agent`` module a source text imports, at any depth (a function's body too);
    ``from agent.x import y`` counts as importing ``agent.x``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return [name for name in found if name == "agent" or name.startswith("agent.")]


def upward_imports(root: Path = AGENT) -> list[str]:
    problems = []
    for path in sorted(root.rglob("*.py")):
        importer = _module_name(path, root)
        for imported in _imports(path):
            if layer_of(imported) < layer_of(importer) and (importer, imported) not in KNOWN_UPWARD:
                problems.append(
                    f"{importer} ({LAYERS[layer_of(importer)][0]}) imports "
                    f"{imported} ({LAYERS[layer_of(imported)][0]})"
                )
    return problems


def test_imports_point_down_the_layers() -> None:
    assert upward_imports() == []


def package_of(module: str) -> str:
    """The agent's package (or top-level module) a module belongs to: ``agent.store``
    for ``agent.store.sqlite.turns``."""
    return ".".join(module.split(".")[:2])


def package_imports(root: Path = AGENT) -> dict[str, set[str]]:
    """Which of the agent's packages each one imports (itself left out)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        importer = package_of(_module_name(path, root))
        imported = {package_of(name) for name in _imports(path)} - {importer}
        graph.setdefault(importer, set()).update(imported)
    return graph


def _circle_from(graph: dict[str, set[str]], start: str, path: list[str]) -> list[str] | None:
    """A path from ``path``'s end back to ``start`` through names after it, if one exists."""
    for nxt in sorted(graph.get(path[-1], ())):
        if nxt == start:
            return [*path, start]
        if nxt > start and nxt not in path:  # a circle is found from its least name
            found = _circle_from(graph, start, [*path, nxt])
            if found is not None:
                return found
    return None


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of packages importing one another, as the path around it (its least
    name first, back to it); one per package that starts one, so a circle shows once."""
    circles = (_circle_from(graph, start, [start]) for start in sorted(graph))
    return [circle for circle in circles if circle is not None]


def sibling_imports(root: Path = AGENT) -> list[str]:
    problems = []
    for path in sorted(root.rglob("*.py")):
        importer = _module_name(path, root)
        for imported in _imports(path):
            for group in SIBLINGS:
                mine, theirs = package_of(importer), package_of(imported)
                if mine in group and theirs in group and mine != theirs:
                    problems.append(f"{importer} imports its sibling {imported}")
    return problems


def test_no_circle_of_imports_between_packages() -> None:
    assert import_circles(package_imports()) == []


def test_the_two_pipeline_kinds_never_import_each_other() -> None:
    assert sibling_imports() == []


def test_a_circle_and_a_sibling_import_are_caught(tmp_path: Path) -> None:
    graph = {
        "agent.a": {"agent.b"},
        "agent.b": {"agent.c"},
        "agent.c": {"agent.a"},
        "agent.d": set(),
    }
    assert import_circles(graph) == [["agent.a", "agent.b", "agent.c", "agent.a"]]
    assert import_circles({"agent.a": {"agent.b"}, "agent.b": set()}) == []
    package = tmp_path / "agent"
    (package / "pipeline").mkdir(parents=True)
    (package / "dream").mkdir()
    (package / "__init__.py").write_text("")
    (package / "pipeline" / "__init__.py").write_text("from agent.dream.graph import x\n")
    (package / "dream" / "__init__.py").write_text("from agent.turn.base import y\n")
    assert sibling_imports(package) == ["agent.pipeline imports its sibling agent.dream.graph"]


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
        ("agent.turn.base", "agent.pipeline.graph"),
        ("agent.dream.kind", "agent.kinds"),
    ],
)
def test_an_upward_import_is_caught(importer: str, imported: str) -> None:
    assert layer_of(imported) < layer_of(importer)


def test_every_module_has_a_layer() -> None:
    for path in AGENT.rglob("*.py"):
        layer_of(_module_name(path))


def test_a_module_outside_every_layer_is_named() -> None:
    """The package root's layer covers agent/__init__.py alone: a new top-level module or
    package fails until LAYERS gives it a place."""
    with pytest.raises(AssertionError, match=r"agent\.newthing is in no layer"):
        layer_of("agent.newthing")
    with pytest.raises(AssertionError, match=r"agent\.newpackage\.x is in no layer"):
        layer_of("agent.newpackage.x")
    assert LAYERS[layer_of("agent")][0] == "package root"
    assert LAYERS[layer_of("agent.sdk.testing")][0] == "service SDK"
    assert LAYERS[layer_of("agent.flow")][0] == "message flow"
    with pytest.raises(AssertionError, match=r"agent\.flowers is in no layer"):
        layer_of("agent.flowers")  # a prefix is a whole name, not its first letters


def test_the_scanner_finds_imports_wherever_they_are() -> None:
    source = """
import agent.store.base
import json, agent.pipeline as pipe
from agent.sdk.models import DialogView
from . import sibling
from fastapi import FastAPI

def later() -> None:
    from agent.api.deps import Components

class Lazy:
    def method(self) -> None:
        import agent.cli.main
"""
    assert sorted(imports_in(source)) == [
        "agent.api.deps",
        "agent.cli.main",
        "agent.pipeline",
        "agent.sdk.models",
        "agent.store.base",
    ]


def test_the_scanner_reports_an_upward_import_in_a_tree(tmp_path: Path) -> None:
    """upward_imports over a small tree of files: the one upward import is reported with
    both modules and their layers, a downward one is not."""
    package = tmp_path / "agent"
    (package / "store").mkdir(parents=True)
    (package / "api").mkdir()
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("from agent.api.deps import x\n")
    (package / "api" / "__init__.py").write_text("from agent.store.base import y\n")
    assert upward_imports(package) == [
        "agent.store (store) imports agent.api.deps (API and composition root)"
    ]
