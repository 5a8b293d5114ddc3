"""What pyproject.toml asks for is what constraints.txt pins, the version is written once,
and the service SDK (sdk/pyproject.toml) imports only what its own wheel installs."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import agent

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SDK_PYPROJECT = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())
SDK = SDK_PYPROJECT["project"]
#: The project's own distributions: installed from this checkout, pinned by no file.
OWN = {"chorus", "chorus-sdk"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, version = line.split("==")
            found[canonical(name)] = version
    return found


def test_every_requirement_is_pinned_within_its_range() -> None:
    """A dependency added or narrowed in pyproject.toml without `make lock` fails here."""
    pinned = pins()
    extras = PROJECT["optional-dependencies"]
    wanted = [*PROJECT["dependencies"], *extras["dev"], *extras["bench"], *extras["services"]]
    wanted += [
        *SDK["dependencies"],
        *(r for extra in SDK["optional-dependencies"].values() for r in extra),
    ]
    for line in wanted:
        requirement = Requirement(line)
        name = canonical(requirement.name)
        if name in OWN:
            continue
        assert name in pinned, f"{name} is not in constraints.txt: run `make lock`"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {name}=={pinned[name]}, outside {requirement.specifier}"
        )


def test_pymongo_has_a_stable_async_api_that_does_not_block_the_loop() -> None:
    (pymongo,) = [r for r in map(Requirement, PROJECT["dependencies"]) if r.name == "pymongo"]
    assert not pymongo.specifier.contains("4.13.1"), "4.13.2 fixed AsyncMongoClient's connect"
    assert pymongo.specifier.contains("4.13.2")


def test_the_version_is_written_in_one_place() -> None:
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["dynamic"]["version"] == {"attr": "agent.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", agent.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {agent.__version__}" in changelog or "## Unreleased" in changelog


def test_the_agent_depends_on_the_sdk_of_its_own_version() -> None:
    """The SDK's wheel is versioned with the agent (the same agent.__version__), and the
    agent's wheel, which leaves agent/sdk/ to it, asks for exactly that version."""
    (sdk,) = [r for r in map(Requirement, PROJECT["dependencies"]) if r.name == "chorus-sdk"]
    assert str(sdk.specifier) == f"=={agent.__version__}", "pin chorus-sdk at agent.__version__"
    assert "version" in SDK["dynamic"]
    assert SDK_PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "agent.__version__"
    }


def test_the_sdk_asks_for_fastapi_pydantic_and_uvicorn_with_the_agents_bounds() -> None:
    core = {canonical(Requirement(r).name): Requirement(r).specifier for r in SDK["dependencies"]}
    assert sorted(core) == ["fastapi", "pydantic", "uvicorn"]
    agents = {
        canonical(Requirement(r).name): Requirement(r).specifier for r in PROJECT["dependencies"]
    }
    extras = [r for extra in SDK["optional-dependencies"].values() for r in extra]
    for line in [*SDK["dependencies"], *extras]:
        requirement = Requirement(line)
        name = canonical(requirement.name)
        assert agents[name] == requirement.specifier, (
            f"sdk/pyproject.toml: {line}: use {agents[name]}"
        )


#: The modules the SDK may import from outside itself and the standard library, and the
#: distribution of sdk/pyproject.toml that brings each (Starlette and anyio come with FastAPI).
SDK_IMPORTS = {
    "fastapi": "fastapi",
    "starlette": "fastapi",
    "pydantic": "pydantic",
    "uvicorn": "uvicorn",
    "anyio": "fastapi",
    "httpx": "httpx",
    "opentelemetry": "opentelemetry-sdk",
}
#: The SDK's modules that need an extra of its wheel; the others only its core dependencies.
SDK_EXTRA_OF = {"tracing.py": "tracing", "testing.py": "testing"}


def runtime_imports(source: str) -> list[str]:
    """Every module a source imports when it runs, at any depth (a function's body too),
    leaving out what only the type checker reads (``if TYPE_CHECKING:``)."""
    found: list[str] = []
    pending: list[ast.AST] = [ast.parse(source)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        pending.extend(ast.iter_child_nodes(node))
    return found


@pytest.mark.parametrize(
    "module", sorted(p.name for p in (ROOT / "agent" / "sdk").glob("*.py")), ids=str
)
def test_the_sdk_imports_only_what_its_wheel_installs(module: str) -> None:
    """With the chorus-sdk wheel alone (its extra, for testing.py and tracing.py), each
    module of agent/sdk imports: tests/sdk/test_distribution.py runs them there."""
    extra = SDK_EXTRA_OF.get(module)
    allowed = {canonical(Requirement(r).name) for r in SDK["dependencies"]}
    if extra:
        allowed |= {canonical(Requirement(r).name) for r in SDK["optional-dependencies"][extra]}
    source = (ROOT / "agent" / "sdk" / module).read_text()
    beyond = []
    for name in runtime_imports(source):
        top = name.split(".")[0]
        if top == "agent":
            if not name.startswith("agent.sdk"):
                beyond.append(name)
        elif top not in sys.stdlib_module_names and SDK_IMPORTS.get(top) not in allowed:
            beyond.append(name)
    assert not beyond, f"agent/sdk/{module} imports {beyond}, which chorus-sdk does not install"


def test_the_import_check_sees_through_functions_but_not_type_checking() -> None:
    source = """
from typing import TYPE_CHECKING
import fastapi
if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
def later() -> None:
    from agent.sdk.tracing import TraceRequests
"""
    assert sorted(runtime_imports(source)) == ["agent.sdk.tracing", "fastapi", "typing"]
