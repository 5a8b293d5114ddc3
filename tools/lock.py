"""Write constraints.txt: the exact versions of everything ``make install`` installs.

Reads the installed ``chorus`` distribution's requirements with the extras ``make install``
asks for (dev, bench, services), follows each requirement through the installed packages'
own metadata, and pins every package reached at its installed version. Nothing is
downloaded: run it in the virtual environment whose versions pass ``make test``.

    .venv/bin/python tools/lock.py           # or: make lock

``make install`` installs with ``-c constraints.txt``, so a fresh clone gets the versions
the tests passed with, and a new release of a dependency changes nothing until the file is
written again (and reviewed, like any change).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("dev", "bench", "services", "qdrant")
HEADER = """\
# Exact versions of what `make install` installs (chorus[dev,bench,services,qdrant] and every
# dependency of theirs), used as pip constraints: `pip install -c constraints.txt ...`.
# Written by tools/lock.py (`make lock`) from a virtual environment that passed `make test`;
# edit pyproject.toml, install, test, then lock again. Do not edit by hand.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wanted(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    """Whether the requirement applies here, for these extras of the one requiring it."""
    if requirement.marker is None:
        return True
    marker = requirement.marker
    for extra in extras or ("",):
        environment = {str(k): str(v) for k, v in default_environment().items()}
        environment["extra"] = extra
        if marker.evaluate(environment):
            return True
    return False


def closure(root: str, extras: tuple[str, ...]) -> dict[str, tuple[str, set[str]]]:
    """Every distribution reached from ``root[extras]``: name -> (version, required by)."""
    found: dict[str, tuple[str, set[str]]] = {}
    pending = [(root, extras, "")]
    while pending:
        name, its_extras, parent = pending.pop()
        key = canonical(name)
        if key in found:
            found[key][1].add(parent)
            continue
        dist = metadata.distribution(name)
        found[key] = (dist.version, {parent} if parent else set())
        for line in dist.requires or []:
            requirement = Requirement(line)
            if wanted(requirement, its_extras):
                pending.append((requirement.name, tuple(requirement.extras), key))
    return found


def main() -> None:
    found = closure("chorus", EXTRAS)
    # The project's own distributions, installed from this checkout: the agent and its
    # service SDK (sdk/pyproject.toml), whose version the agent pins itself.
    del found["chorus"], found["chorus-sdk"]
    lines = [HEADER]
    for key in sorted(found):
        version, parents = found[key]
        lines.append(f"{key}=={version}\n")
        lines.append(f"    # via {', '.join(sorted(parents))}\n")
    out = ROOT / "constraints.txt"
    out.write_text("".join(lines))
    print(f"{out.name}: {len(found)} packages pinned", file=sys.stderr)


if __name__ == "__main__":
    main()
