"""What an image runs, tried without a Docker engine: the app its CMD serves, imported in a
fresh interpreter from the staged files alone (tests/support/dockerfiles.py stages them),
with every module the image's ``pip install`` would not bring made unimportable, and sent a
few requests straight into its ASGI app."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from tests.support.dockerfiles import ROOT, Dockerfile
from tests.support.processes import unmeasured_environment

#: Stands in for uvicorn on PATH: prints the arguments the CMD gives it, NUL-separated.
_UVICORN_STAND_IN = "#!/bin/sh\nprintf '%s\\0' uvicorn \"$@\"\n"


@dataclass
class Uvicorn:
    module: str
    attribute: str
    factory: bool
    port: int


def command_line(dockerfile: Dockerfile) -> list[str]:
    """The CMD as run: the agent's ``python -m agent.api.serve ...`` is uvicorn serving
    ``agent.api.serve.APP``; a ``sh -c`` CMD is run by a real shell with the image's ENV and
    a stand-in uvicorn that reports the arguments it was given."""
    cmd = dockerfile.cmd
    if cmd[:3] == ["python", "-m", "agent.api.serve"]:
        from agent.api.serve import APP

        return ["uvicorn", "--factory", APP, *cmd[3:]]
    if cmd[:2] != ["sh", "-c"]:
        return cmd
    with tempfile.TemporaryDirectory() as bin_dir:
        stand_in = Path(bin_dir) / "uvicorn"
        stand_in.write_text(_UVICORN_STAND_IN)
        stand_in.chmod(0o755)
        result = subprocess.run(
            cmd,
            env={**dockerfile.env, "PATH": f"{bin_dir}:/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    assert result.returncode == 0, f"{dockerfile.path}: CMD {cmd} fails: {result.stderr}"
    return result.stdout.split("\0")[:-1]


def uvicorn_command(dockerfile: Dockerfile) -> Uvicorn:
    """What the CMD serves: ``uvicorn [--factory] module:app --host ... --port ...``."""
    cmd = command_line(dockerfile)
    assert cmd and cmd[0] == "uvicorn", f"{dockerfile.path}: CMD {cmd} is not `uvicorn ...`"
    targets = [
        arg
        for i, arg in enumerate(cmd[1:], 1)
        if not arg.startswith("-") and cmd[i - 1] not in ("--host", "--port")
    ]
    assert len(targets) == 1 and ":" in targets[0], f"{dockerfile.path}: no module:app in {cmd}"
    module, attribute = targets[0].split(":")
    assert "--port" in cmd and "--host" in cmd, f"{dockerfile.path}: CMD {cmd} needs --host/--port"
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0", "listen on all interfaces in a container"
    return Uvicorn(module, attribute, "--factory" in cmd, int(cmd[cmd.index("--port") + 1]))


# -- distributions ----------------------------------------------------------------------------


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path: Path) -> list[str]:
    return [
        line.split("#", 1)[0].strip()
        for line in path.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]


def closure(requirements: list[str]) -> set[str]:
    """The distributions ``pip install`` of these requirements brings (as installed here)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = normalise(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(requirement.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            sub = Requirement(text)
            extras = requirement.extras or {""}
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return seen


def blocked_modules(requirements: list[str], own: set[str]) -> list[str]:
    """Top-level modules of the distributions installed here that ``pip install`` of
    ``requirements`` would not bring. The probe makes importing them fail, as it would in the
    image; an optional import (``try: import sniffio``) takes its fallback, as it would there."""
    installed = closure(requirements)
    return sorted(
        top
        for top, dists in _top_level_modules()
        if top not in own and not {normalise(d) for d in dists} & installed
    )


@functools.cache
def _top_level_modules() -> tuple[tuple[str, frozenset[str]], ...]:
    """Each top-level module installed here and the distributions that bring it: read once
    per process (reading every distribution's file list took seconds, for each image)."""
    return tuple(
        (top, frozenset(dists))
        for top, dists in importlib.metadata.packages_distributions().items()
    )


PROBE = r"""
import asyncio, importlib, importlib.abc, json, sys

module_name, attribute, factory, blocked, requests, repository = sys.argv[1:7]
blocked, requests = set(json.loads(blocked)), json.loads(requests)


class NotInTheImage(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {fullname!r} (not in the image)",
                                      name=fullname)
        return None


# The development install (pip install -e .) would find the agent's other modules in the
# repository; the image has only the staged files.
def _from_the_repository(hook):
    return getattr(hook, "__module__", "").startswith("__editable__") or getattr(
        type(hook), "__module__", "").startswith("__editable__")


sys.meta_path[:] = [f for f in sys.meta_path if not _from_the_repository(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not _from_the_repository(h)]
sys.path[:] = [p for p in sys.path if p.rstrip("/") != repository]
sys.path_importer_cache.clear()
sys.meta_path.insert(0, NotInTheImage())
baseline = set(sys.modules)
module = importlib.import_module(module_name)
target = getattr(module, attribute, None)
app = target() if factory == "1" and callable(target) else target


async def call(method, path, body):
    # One HTTP request straight into the ASGI app: no server, no client library.
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": b"", "client": ("127.0.0.1", 40000),
             "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    incoming = [{"type": "http.request", "body": body.encode(), "more_body": False}]
    sent = []

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent).decode(errors="replace")


answers = {f"{m} {p}": asyncio.run(call(m, p, b)) for m, p, b in requests} if app else {}
print(json.dumps({
    "module_file": module.__file__,
    "agent_file": getattr(sys.modules.get("agent"), "__file__", None),
    "app_type": None if app is None else f"{type(app).__module__}.{type(app).__qualname__}",
    # the app's class and those it derives from (the agent's is FastAPI's own subclass)
    "app_types": [] if app is None else [f"{c.__module__}.{c.__qualname__}"
                                         for c in type(app).__mro__],
    "answers": answers,
    "imported": sorted(set(sys.modules) - baseline),
    "files": {name: getattr(sys.modules[name], "__file__", None)
              for name in set(sys.modules) - baseline},
}))
"""


def probe(
    workdir: Path,
    command: Uvicorn,
    *,
    blocked: list[str],
    requests: list[tuple[str, str, str]],
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Import the CMD's module in a fresh interpreter run in the staged WORKDIR (first on
    sys.path, as for uvicorn there) with the ``blocked`` modules unimportable, build the app
    and send it the ``(method, path, body)`` requests. Coverage does not measure it: the
    staged files are copies of ones the suite measures where they are."""
    clean = {
        k: v
        for k, v in unmeasured_environment("CHORUS_").items()
        if k not in ("PYTHONPATH", "PYTHONSAFEPATH")
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            command.module,
            command.attribute,
            "1" if command.factory else "0",
            json.dumps(blocked),
            json.dumps(requests),
            str(ROOT),
        ],
        cwd=workdir,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, (
        f"`{command.module}:{command.attribute}` does not run with the image's files and "
        f"packages alone:\n{result.stderr[-3000:]}"
    )
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def outside_the_image(found: dict[str, Any], own: set[str], workdir: Path) -> list[str]:
    """Modules of our own packages that were loaded from anywhere but the staged files."""
    return sorted(
        f"{name}: {file}"
        for name, file in found["files"].items()
        if name.split(".")[0] in own and file and not Path(file).is_relative_to(workdir)
    )
