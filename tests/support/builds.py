"""The Go tools the suite builds once and caches under .cache/ (FerretDB, Helm): each has a
``tools/<name>/build.sh`` that builds when out of date and prints the binary's path last."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def built_binary(name: str, script: Path, cached: Path | None, error: type[Exception]) -> Path:
    """The binary ``script`` builds (a no-op when up to date); without Go, ``cached`` (an
    already-built binary) is used as it is. ``error`` is raised, naming ``name``, when the
    build fails or prints no binary."""
    if shutil.which("go") is None and cached is not None:
        return cached
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise error(f"building {name} failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    lines = result.stdout.strip().splitlines()
    if not lines or not os.access(lines[-1], os.X_OK):
        raise error(f"build.sh printed no binary path: {result.stdout!r}")
    return Path(lines[-1])
