"""Build the service SDK's wheel, ``chorus-sdk`` (sdk/pyproject.toml), into ``dist/``.

    .venv/bin/python tools/build_sdk.py [--out DIR]     # or: make sdk-wheel

The wheel is built from a copy of the files it is made of (sdk/pyproject.toml,
agent/__init__.py for the version, agent/sdk/), not in the repository: an in-place build
leaves build/ behind, and a module since removed from agent/sdk would still be in the next
wheel. ``uv build --wheel`` builds it with setuptools (which uv fetches, as for ``make
install``): uv is the installer ``make install`` puts in .venv/, so this needs no build tool
of its own, and it builds the same wheel as ``pip wheel --no-deps`` for a quarter of its CPU
(tests/sdk/test_distribution.py builds two). Prints the wheel's path.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel is built from, relative to the repository.
SOURCES = ("sdk/pyproject.toml", "agent/__init__.py", "agent/sdk")


def build(out: Path) -> Path:
    """The wheel built into ``out`` (made if missing); an older wheel of it there is replaced."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chorus-sdk-") as scratch:
        staged = Path(scratch)
        for source in SOURCES:
            target = staged / source
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(ROOT / source, target)
        built = staged / "wheel"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "uv",
                "build",
                "--quiet",
                "--wheel",
                "--out-dir",
                str(built),
                str(staged / "sdk"),
            ],
            check=True,
        )
        (wheel,) = built.glob("chorus_sdk-*.whl")
        destination = out / wheel.name
        shutil.move(wheel, destination)  # replaces the wheel of the same version
    return destination


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="default: dist/")
    print(build(parser.parse_args().out))


if __name__ == "__main__":
    main()
