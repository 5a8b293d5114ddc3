"""What pyproject.toml asks for is what constraints.txt pins, and the version is written once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

import agent

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


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
    for line in wanted:
        requirement = Requirement(line)
        name = canonical(requirement.name)
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
