"""docker-compose.yml and the pipelines as the deploy tests read them: the compose file's
services (YAML anchors and ``<<`` merges resolved), the build of each, its environment with
compose's variables filled in as when nothing is set, and Debian's ``docker-compose``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.dockerfiles import ROOT, Dockerfile, parse_dockerfile
from tests.support.processes import COMMAND_TIMEOUT

COMPOSE_FILE = ROOT / "docker-compose.yml"
#: Values for ``${VAR:?message}`` variables, which compose refuses to leave unset.
REQUIRED_VARIABLE_VALUE = "compose-test-0123456789abcdef"


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())  # SafeLoader resolves `<<: *anchor` merges
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), (
        f"{COMPOSE_FILE.name}: no top-level `services` mapping"
    )
    return data


def load_pipeline(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def pipeline_entries(pipeline: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{service name: (group, entry)}`` over every group."""
    return {
        name: (group, entry)
        for group, services in pipeline["services"].items()
        for name, entry in services.items()
    }


def containerised(pipeline: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The enabled services the agent reaches over HTTP (built-in ones run inside the agent)."""
    return {
        name: (group, entry)
        for name, (group, entry) in pipeline_entries(pipeline).items()
        if entry.get("is_enabled", True) and entry["connector"].get("url")
    }


def without_targets(pipeline: dict[str, Any]) -> dict[str, Any]:
    """The pipeline without where its services run: a URL, or a module the agent runs."""
    copy: dict[str, Any] = json.loads(json.dumps(pipeline))
    for _, entry in pipeline_entries(copy).values():
        entry["connector"].pop("url", None)
        entry["connector"].pop("module", None)
    return copy


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}``, ``${VAR:?error}`` and ``${VAR}`` as they come out when
    nothing is set (the test must not depend on the caller's environment)."""

    def replace(match: re.Match[str]) -> str:
        operator, argument = match.group(2), match.group(3) or ""
        if operator == ":?":
            return REQUIRED_VARIABLE_VALUE
        return argument if operator == ":-" else ""

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-?])([^}]*))?\}", replace, value)


def environment(spec: dict[str, Any]) -> dict[str, str]:
    """A compose service's ``environment``, interpolated. A variable without a value
    (``KEY:``, or ``- KEY``) is passed from the host only when set there, as compose does."""
    env = spec.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    passed = {key: os.environ.get(key) if value is None else value for key, value in env.items()}
    return {key: interpolate(str(value)) for key, value in passed.items() if value is not None}


def required_variables() -> dict[str, str]:
    """``${VAR:?...}`` variables of the compose file, with a value for the test."""
    names = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?", COMPOSE_FILE.read_text())
    return {name: os.environ.get(name) or REQUIRED_VARIABLE_VALUE for name in names}


def healthcheck_url(test: object) -> tuple[int, str]:
    """The port and path a ``python -c "urlopen('http://127.0.0.1:PORT/PATH')"`` check hits."""
    text = " ".join(test) if isinstance(test, list) else str(test)
    match = re.search(r"http://(?:127\.0\.0\.1|localhost):(\d+)(/[^'\"\s]*)", text)
    assert match, f"healthcheck {text!r} does not GET http://127.0.0.1:<port>/<path>"
    return int(match.group(1)), match.group(2)


def build_of(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The service's ``build`` as a mapping; its context must be the repository root."""
    build = spec["build"]
    build = {"context": build} if isinstance(build, str) else build
    context = (COMPOSE_FILE.parent / build.get("context", ".")).resolve()
    assert context == ROOT, f"{name}: build context must be the repository root, not {context}"
    return dict(build)


def dockerfile_of(name: str, spec: dict[str, Any]) -> Dockerfile:
    """The Dockerfile the service builds, read with the service's build arguments."""
    build = build_of(name, spec)
    path = ROOT / build.get("dockerfile", "Dockerfile")
    assert path.is_file(), f"{name}: Dockerfile {build.get('dockerfile')} does not exist"
    args = build.get("args") or {}
    if isinstance(args, list):
        args = dict(item.split("=", 1) for item in args)
    return parse_dockerfile(path, {key: str(value) for key, value in args.items()})


def docker_compose() -> str:
    binary = shutil.which("docker-compose")
    if binary is None:
        reason = (
            "docker-compose is not installed: run `sh tools/ensure.sh docker-compose` "
            "(`make test` does) or `apt-get install docker-compose`"
        )
        if os.environ.get("REQUIRE_DOCKER_COMPOSE") == "1":
            pytest.fail(f"REQUIRE_DOCKER_COMPOSE=1 but {reason}")
        pytest.skip(reason)
    return binary


def run_docker_compose(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [docker_compose(), "--file", str(COMPOSE_FILE), "--project-directory", str(ROOT), *args],
        cwd=ROOT,
        env={**os.environ, **required_variables()},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
