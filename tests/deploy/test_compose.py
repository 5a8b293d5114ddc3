"""The docker-compose deployment, checked without a Docker engine.

* ``docker-compose config -q`` (Debian's docker-compose, installed by ``make test`` through
  ``deploy/ensure-docker-compose.sh``) validates the file against the Compose schema. Without
  the binary the test is skipped, unless ``REQUIRE_DOCKER_COMPOSE=1``, which makes it a failure.
* The compose file, the compose pipeline (``deploy/pipeline.compose.json``) and
  ``pipeline.json`` agree: the same services, addressed by their compose names on port 8000.
* Every Dockerfile exists, and so does every ``COPY`` source (after ``.dockerignore``).
* Each image is *staged*: the files its ``COPY`` instructions would put in the image are copied
  to a temporary directory, and the module its ``CMD`` runs is imported there in a fresh
  interpreter. A service must import with nothing but its staged files and the distributions
  ``deploy/service-requirements.txt`` (and its own ``requirements.txt``) install; the agent must
  start from the environment compose gives it.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement

from tests.support.views import view

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
COMPOSE_PIPELINE = ROOT / "deploy" / "pipeline.compose.json"
LOCAL_PIPELINE = ROOT / "pipeline.json"
SERVICE_REQUIREMENTS = ROOT / "deploy" / "service-requirements.txt"
DOCKERIGNORE = ROOT / ".dockerignore"

#: Compose services that are not pipeline services.
INFRASTRUCTURE = {"mongo", "agent"}
#: Every service container listens here; the pipeline addresses it so.
SERVICE_PORT = 8000
AGENT_PORT = 4242
#: A compose service name is a host name on the compose network.
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
#: Values for ``${VAR:?message}`` variables, which compose refuses to leave unset.
REQUIRED_VARIABLE_VALUE = "compose-test-0123456789abcdef"


# -- reading the files ----------------------------------------------------------------------


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())  # SafeLoader resolves `<<: *anchor` merges
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), (
        f"{COMPOSE_FILE.name}: no top-level `services` mapping"
    )
    return data


COMPOSE = load_compose()
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
BUILT = sorted(name for name, spec in SERVICES.items() if "build" in spec)
PIPELINE_SERVICES = sorted(set(SERVICES) - INFRASTRUCTURE)


def load_pipeline(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def pipeline_entries(pipeline: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{service name: (group, entry)}`` over every group."""
    return {name: (group, entry)
            for group, services in pipeline["services"].items()
            for name, entry in services.items()}


def containerised(pipeline: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The enabled services the agent reaches over HTTP (built-in ones run inside the agent)."""
    return {name: (group, entry) for name, (group, entry) in pipeline_entries(pipeline).items()
            if entry.get("is_enabled", True) and entry["connector"].get("url")}


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}``, ``${VAR:?error}`` and ``${VAR}`` as they come out when
    nothing is set (the test must not depend on the caller's environment)."""

    def replace(match: re.Match[str]) -> str:
        operator, argument = match.group(2), match.group(3) or ""
        if operator == ":?":
            return REQUIRED_VARIABLE_VALUE
        return argument if operator == ":-" else ""

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-?])([^}]*))?\}", replace, value)


def environment(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: interpolate(str(value)) for key, value in env.items()}


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


# -- Dockerfiles ----------------------------------------------------------------------------


@dataclass
class Copy:
    sources: list[str]
    dest: str  # absolute, in the image
    line: int


@dataclass
class Dockerfile:
    path: Path
    base: str = ""
    user: str = ""
    workdir: str = "/"
    copies: list[Copy] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: str = ""


def instructions(text: str) -> Iterator[tuple[int, str, str]]:
    """``(line, KEYWORD, arguments)``: continuations joined, comment lines dropped."""
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comment lines are removed even inside a continued instruction
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer.append(line[:-1].strip())
            continue
        buffer.append(line)
        keyword, _, args = " ".join(buffer).partition(" ")
        buffer = []
        yield start, keyword.upper(), args.strip()
    assert not buffer, "the last instruction ends with a line continuation"


def parse_dockerfile(path: Path) -> Dockerfile:
    result = Dockerfile(path)
    for line, keyword, args in instructions(path.read_text()):
        if keyword == "FROM":
            result.base = args.split()[0]
        elif keyword == "USER":
            result.user = args
        elif keyword == "WORKDIR":
            result.workdir = str(PurePosixPath(result.workdir) / args)
        elif keyword in ("COPY", "ADD"):
            parts = json.loads(args) if args.startswith("[") else shlex.split(args)
            flags = [p for p in parts if p.startswith("--")]
            parts = [p for p in parts if not p.startswith("--")]
            if any(f.startswith("--from") for f in flags):
                continue  # from another stage or image, not from the build context
            dest = parts[-1]
            absolute = str(PurePosixPath(result.workdir) / dest)
            result.copies.append(Copy(parts[:-1], absolute + ("/" if dest.endswith("/") else ""),
                                      line))
        elif keyword == "CMD":
            assert args.startswith("["), f"{path}:{line}: use the exec form CMD [...]"
            result.cmd = json.loads(args)
        elif keyword == "HEALTHCHECK":
            result.healthcheck = args
    return result


@functools.cache
def dockerignore() -> tuple[tuple[re.Pattern[str], bool], ...]:
    """``.dockerignore`` as ``(regex, excluded)`` pairs, in order (the last match wins)."""
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines() if DOCKERIGNORE.exists() else []:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((re.compile(regex), not negated))
    return tuple(rules)


def ignored(relative: str) -> bool:
    """Whether the build context leaves out this path (or a folder it is in)."""
    parts = PurePosixPath(relative).parts
    excluded = False
    for regex, exclude in dockerignore():
        if any(regex.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            excluded = exclude
    return excluded


def context_files(source: str) -> list[str]:
    """The build-context files (relative paths) one COPY source sends, after .dockerignore."""
    matches = sorted(glob.glob(source, root_dir=ROOT)) if glob.has_magic(source) else (
        [source.rstrip("/")] if (ROOT / source).exists() else []
    )
    files: list[str] = []
    for match in matches:
        if ignored(match):
            continue
        path = ROOT / match
        if path.is_dir():
            files += [str(p.relative_to(ROOT)) for p in sorted(path.rglob("*"))
                      if p.is_file() and not ignored(str(p.relative_to(ROOT)))]
        else:
            files.append(match)
    return files


def copy_problems(dockerfile: Dockerfile) -> list[str]:
    problems = []
    for copy in dockerfile.copies:
        where = f"{dockerfile.path.relative_to(ROOT)}:{copy.line}"
        sent = 0
        for source in copy.sources:
            files = context_files(source)
            sent += len(files)
            if not glob.has_magic(source) and not files:
                missing = not (ROOT / source).exists()
                problems.append(f"{where}: COPY source {source!r} "
                                + ("does not exist" if missing else
                                   "is empty or excluded by .dockerignore"))
        if sent == 0:
            problems.append(f"{where}: COPY {' '.join(copy.sources)} matches no file")
    return problems


def stage(dockerfile: Dockerfile, into: Path) -> Path:
    """Copy what the COPY instructions put in the image to ``into`` (as the image's ``/``);
    return the staged WORKDIR."""
    for copy in dockerfile.copies:
        many = len(copy.sources) > 1 or any(glob.has_magic(s) for s in copy.sources)
        for source in copy.sources:
            matches = sorted(glob.glob(source, root_dir=ROOT)) if glob.has_magic(source) else [
                source.rstrip("/")]
            for match in matches:
                if ignored(match):
                    continue
                origin = ROOT / match
                target = into / copy.dest.lstrip("/")
                if origin.is_dir():
                    for file in context_files(match):
                        relative = Path(file).relative_to(match)
                        (target / relative).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(ROOT / file, target / relative)
                else:
                    if many or copy.dest.endswith("/"):
                        target = target / origin.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, target)
    workdir = into / dockerfile.workdir.lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


@dataclass
class Uvicorn:
    module: str
    attribute: str
    factory: bool
    port: int


def uvicorn_command(dockerfile: Dockerfile) -> Uvicorn:
    """What a CMD serves: ``uvicorn [--factory] module:app ...``, or the agent's own
    ``python -m agent.api.serve ...`` (uvicorn serving ``agent.api.serve.APP``)."""
    cmd = dockerfile.cmd
    if cmd[:3] == ["python", "-m", "agent.api.serve"]:
        from agent.api.serve import APP

        cmd = ["uvicorn", "--factory", APP, *cmd[3:]]
    assert cmd and cmd[0] == "uvicorn", f"{dockerfile.path}: CMD {cmd} is not `uvicorn ...`"
    targets = [arg for i, arg in enumerate(cmd[1:], 1)
               if not arg.startswith("-") and cmd[i - 1] not in ("--host", "--port")]
    assert len(targets) == 1 and ":" in targets[0], f"{dockerfile.path}: no module:app in {cmd}"
    module, attribute = targets[0].split(":")
    assert "--port" in cmd and "--host" in cmd, f"{dockerfile.path}: CMD {cmd} needs --host/--port"
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0", "listen on all interfaces in a container"
    return Uvicorn(module, attribute, "--factory" in cmd, int(cmd[cmd.index("--port") + 1]))


def dockerfile_of(service: str) -> Dockerfile:
    build = SERVICES[service]["build"]
    build = {"context": build} if isinstance(build, str) else build
    context = (COMPOSE_FILE.parent / build.get("context", ".")).resolve()
    assert context == ROOT, f"{service}: build context must be the repository root, not {context}"
    path = context / build.get("dockerfile", "Dockerfile")
    assert path.is_file(), f"{service}: Dockerfile {build.get('dockerfile')} does not exist"
    return parse_dockerfile(path)


# -- distributions --------------------------------------------------------------------------


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path: Path) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()
            if line.split("#", 1)[0].strip()]


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
    return sorted(top for top, dists in importlib.metadata.packages_distributions().items()
                  if top not in own and not {normalise(d) for d in dists} & installed)


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
    "answers": answers,
    "imported": sorted(set(sys.modules) - baseline),
    "files": {name: getattr(sys.modules[name], "__file__", None)
              for name in set(sys.modules) - baseline},
}))
"""


def probe(workdir: Path, command: Uvicorn, *, blocked: list[str],
          requests: list[tuple[str, str, str]], env: dict[str, str] | None = None,
          ) -> dict[str, Any]:
    """Import the CMD's module in a fresh interpreter run in the staged WORKDIR (first on
    sys.path, as for uvicorn there) with the ``blocked`` modules unimportable, build the app
    and send it the ``(method, path, body)`` requests."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("CHORUS_") and k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, command.module, command.attribute,
         "1" if command.factory else "0", json.dumps(blocked), json.dumps(requests),
         str(ROOT)],
        cwd=workdir, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=120,
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
    return sorted(f"{name}: {file}" for name, file in found["files"].items()
                  if name.split(".")[0] in own and file
                  and not Path(file).is_relative_to(workdir))


# -- (a) the file is valid Compose -----------------------------------------------------------


def docker_compose() -> str:
    binary = shutil.which("docker-compose")
    if binary is None:
        reason = ("docker-compose is not installed: run deploy/ensure-docker-compose.sh "
                  "(`make test` does) or `apt-get install docker-compose`")
        if os.environ.get("REQUIRE_DOCKER_COMPOSE") == "1":
            pytest.fail(f"REQUIRE_DOCKER_COMPOSE=1 but {reason}")
        pytest.skip(reason)
    return binary


def run_docker_compose(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [docker_compose(), "--file", str(COMPOSE_FILE), "--project-directory", str(ROOT), *args],
        cwd=ROOT, env={**os.environ, **required_variables()}, capture_output=True, text=True,
        timeout=60, check=False,
    )


def test_docker_compose_config_accepts_the_file() -> None:
    result = run_docker_compose("config", "-q")
    assert result.returncode == 0, f"docker-compose config -q:\n{result.stderr}"
    assert "variable is not set" not in result.stderr, result.stderr


def test_docker_compose_reads_the_file_as_this_test_does() -> None:
    """The other tests read the YAML with PyYAML (anchors and ``<<`` merges resolved); the
    services and their shared settings must come out the same as docker-compose reads them."""
    result = run_docker_compose("config")
    assert result.returncode == 0, f"docker-compose config:\n{result.stderr}"
    resolved = yaml.safe_load(result.stdout)["services"]
    assert sorted(resolved) == sorted(SERVICES)
    for name, spec in SERVICES.items():
        assert resolved[name].get("restart") == spec.get("restart"), name
        assert resolved[name]["healthcheck"]["test"] == spec["healthcheck"]["test"], name
        assert sorted(resolved[name].get("depends_on") or {}) == sorted(
            spec.get("depends_on") or {}), name


# -- (b) compose and the pipelines name the same services ------------------------------------


def test_every_containerised_pipeline_service_is_a_compose_service() -> None:
    wanted = containerised(load_pipeline(COMPOSE_PIPELINE))
    missing = sorted(set(wanted) - set(SERVICES))
    assert not missing, f"in {COMPOSE_PIPELINE.name} but not in docker-compose.yml: {missing}"


def test_every_compose_service_is_in_the_pipeline() -> None:
    known = pipeline_entries(load_pipeline(COMPOSE_PIPELINE))
    extra = sorted(set(PIPELINE_SERVICES) - set(known))
    assert not extra, f"in docker-compose.yml but not in {COMPOSE_PIPELINE.name}: {extra}"
    assert {"mongo", "agent"} <= set(SERVICES)


def without_urls(pipeline: dict[str, Any]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(pipeline))
    for _, entry in pipeline_entries(copy).values():
        entry["connector"].pop("url", None)
    return copy


def test_compose_pipeline_is_the_local_pipeline_with_other_urls() -> None:
    local, compose = load_pipeline(LOCAL_PIPELINE), load_pipeline(COMPOSE_PIPELINE)
    assert {n: g for n, (g, _) in pipeline_entries(compose).items()} == {
        n: g for n, (g, _) in pipeline_entries(local).items()}
    assert without_urls(compose) == without_urls(local), (
        f"{COMPOSE_PIPELINE.name} must be {LOCAL_PIPELINE.name} with only the URLs changed"
    )


def test_compose_pipeline_is_valid_for_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every enabled service runs once its required variables are set (the LLM skill's
    endpoint, which compose passes to the agent as LLM_BASE_URL)."""
    from agent.pipeline.config import load_pipeline_config
    from agent.pipeline.graph import build_pipeline

    entries = pipeline_entries(load_pipeline(COMPOSE_PIPELINE))
    agent_env = load_compose()["services"]["agent"]["environment"]
    for _, entry in entries.values():
        for variable in entry.get("requires_env", []):
            assert variable in agent_env, f"compose does not pass {variable} to the agent"
            monkeypatch.setenv(variable, "http://example.invalid/v1")
    pipeline = build_pipeline(load_pipeline_config(COMPOSE_PIPELINE))
    assert {node.name for node in pipeline.nodes} == {
        name for name, (_, entry) in entries.items() if entry.get("is_enabled", True)}


# -- (c) Dockerfiles and what they copy exist ------------------------------------------------


def test_mongo_is_the_official_image_and_everything_else_is_built_here() -> None:
    assert "build" not in SERVICES["mongo"]
    assert SERVICES["mongo"]["image"].split(":")[0] == "mongo", SERVICES["mongo"]["image"]
    assert set(BUILT) == set(SERVICES) - {"mongo"}, "the agent and every service build here"


@pytest.mark.parametrize("service", BUILT)
def test_dockerfile_exists_and_its_copy_sources_exist(service: str) -> None:
    dockerfile = dockerfile_of(service)
    assert dockerfile.copies, f"{dockerfile.path}: copies nothing"
    assert not copy_problems(dockerfile), "\n".join(copy_problems(dockerfile))


@pytest.mark.parametrize("service", BUILT)
def test_dockerfile_is_slim_and_runs_as_a_user(service: str) -> None:
    dockerfile = dockerfile_of(service)
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", dockerfile.base), dockerfile.base
    assert dockerfile.user and dockerfile.user.split(":")[0] not in ("root", "0"), (
        f"{dockerfile.path}: add a USER that is not root")


def test_dockerignore_keeps_local_state_and_tests_out() -> None:
    for path in (".venv", ".git", ".cache", "data", "tests", "bench",
                 "agent/__pycache__", "skills/greeting/test_app.py"):
        assert ignored(path), f".dockerignore should exclude {path}"
    for path in ("agent/sdk/service.py", "pyproject.toml", "README.md",
                 "deploy/pipeline.compose.json", "skills/greeting/app.py"):
        assert not ignored(path), f".dockerignore must not exclude {path}"


# -- (d) what each Dockerfile runs imports from the image's files alone ------------------------


@pytest.mark.parametrize("service", PIPELINE_SERVICES)
def test_service_image_runs_its_module_with_the_sdk_only(service: str, tmp_path: Path) -> None:
    dockerfile = dockerfile_of(service)
    command = uvicorn_command(dockerfile)
    from agent.cli.stack import GROUP_FOLDERS

    pipeline_group, _ = pipeline_entries(load_pipeline(COMPOSE_PIPELINE))[service]
    # candidate annotators live in annotators/; a group name the map lacks fails as KeyError
    group = GROUP_FOLDERS[pipeline_group]  # type: ignore[index]
    assert command.module == f"{group}.{service}.app", (
        f"{service}: the pipeline's {pipeline_group}.{service} should run "
        f"{group}.{service}.app, not {command.module}")
    assert dockerfile.path == ROOT / group / service / "Dockerfile"
    assert command.port == SERVICE_PORT and not command.factory

    requirements = requirement_lines(SERVICE_REQUIREMENTS)
    extra = ROOT / group / service / "requirements.txt"
    if extra.exists():
        requirements += requirement_lines(extra)
    blocked = blocked_modules(requirements, own={"agent", group})
    workdir = stage(dockerfile, tmp_path / "image")
    dialog = view("Hello, my name is Ann.", hypotheses=[
        {"skill_name": "greeting", "text": "Nice to meet you, Ann!", "confidence": 0.9}])
    found = probe(workdir, command, blocked=blocked, requests=[
        ("GET", "/health", ""), ("POST", "/respond", json.dumps({"dialogs": [dialog]}))])
    assert Path(found["module_file"]).is_relative_to(workdir), found["module_file"]
    assert Path(found["agent_file"]).is_relative_to(workdir), found["agent_file"]
    assert not outside_the_image(found, {"agent", group}, workdir)
    assert found["app_type"] == "fastapi.applications.FastAPI", (
        f"{command.module}.{command.attribute} is {found['app_type']}, not a FastAPI app")
    assert found["answers"]["GET /health"][0] == 200, found["answers"]
    status, body = found["answers"]["POST /respond"]
    assert status == 200 and len(json.loads(body)) == 1, found["answers"]  # one per dialog

    outside_sdk = [m for m in found["imported"]
                   if m.split(".")[0] == "agent" and m != "agent"
                   and not (m == "agent.sdk" or m.startswith("agent.sdk."))]
    assert not outside_sdk, f"{command.module} imports the agent beyond agent.sdk: {outside_sdk}"


def test_service_requirements_are_only_what_the_sdk_needs() -> None:
    names = {normalise(Requirement(r).name) for r in requirement_lines(SERVICE_REQUIREMENTS)}
    assert names == {"fastapi", "uvicorn", "pydantic", "opentelemetry-sdk",
                     "opentelemetry-exporter-otlp-proto-http"}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floors = {normalise(Requirement(r).name): Requirement(r).specifier
              for r in pyproject["project"]["dependencies"]}
    for line in requirement_lines(SERVICE_REQUIREMENTS):
        requirement = Requirement(line)
        assert str(requirement.specifier) == str(floors[normalise(requirement.name)]), (
            f"{line}: use pyproject.toml's bound ({floors[normalise(requirement.name)]})")


def pyproject_floors() -> dict[str, str]:
    """Each dependency of pyproject.toml (core and extras) and its version bound."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"].values()
    lines = [*pyproject["project"]["dependencies"], *(r for extra in extras for r in extra)]
    floors: dict[str, set[str]] = {}
    for line in lines:
        requirement = Requirement(line)
        floors.setdefault(normalise(requirement.name), set()).add(str(requirement.specifier))
    several = {name: bounds for name, bounds in floors.items() if len(bounds) > 1}
    assert not several, f"pyproject.toml names these with different bounds: {several}"
    return {name: bounds.pop() for name, bounds in floors.items()}


def test_every_requirement_file_uses_the_one_floor_of_pyproject() -> None:
    """A service image must run on what `make run` and the tests install: each requirement
    file names only dependencies of pyproject.toml, with pyproject's own bound."""
    floors = pyproject_floors()
    files = [SERVICE_REQUIREMENTS, *sorted(ROOT.glob("*/*/requirements.txt"))]
    assert len(files) > 4
    for path in files:
        for line in requirement_lines(path):
            requirement = Requirement(line)
            name = normalise(requirement.name)
            where = path.relative_to(ROOT)
            assert name in floors, f"{where}: {name} is not in pyproject.toml (services extra)"
            assert str(requirement.specifier) == floors[name], (
                f"{where}: {line}: use pyproject.toml's bound ({floors[name]})")


def test_agent_image_starts_from_the_compose_environment(tmp_path: Path) -> None:
    dockerfile = dockerfile_of("agent")
    command = uvicorn_command(dockerfile)
    assert (command.module, command.attribute, command.factory) == (
        "agent.api.app", "create_app", True)
    assert command.port == AGENT_PORT

    from agent.settings import ENV_PREFIX, Settings

    env = environment("agent")
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known)
    assert not unknown, f"the agent ignores these variables (typo?): {unknown}"

    workdir = stage(dockerfile, tmp_path / "image")
    image_root = tmp_path / "image"
    pipeline = env["CHORUS_PIPELINE"]
    assert PurePosixPath(pipeline).is_absolute() or pipeline.startswith("deploy/")
    staged_pipeline = image_root / pipeline.lstrip("/") if pipeline.startswith("/") else (
        workdir / pipeline)
    assert staged_pipeline.is_file(), f"CHORUS_PIPELINE={pipeline} is not in the image"
    assert staged_pipeline.read_text() == COMPOSE_PIPELINE.read_text()

    # `pip install .` runs in the WORKDIR: it needs pyproject.toml, and the readme it names
    # (without it setuptools only warns, and builds a package with no description).
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert (workdir / "pyproject.toml").is_file(), "copy pyproject.toml to the WORKDIR"
    readme = pyproject["project"].get("readme")
    readme = readme.get("file") if isinstance(readme, dict) else readme
    assert readme is None or (workdir / readme).is_file(), f"copy {readme} next to pyproject.toml"
    blocked = blocked_modules(pyproject["project"]["dependencies"], own={"agent"})
    _, health = healthcheck_url(SERVICES["agent"]["healthcheck"]["test"])
    found = probe(workdir, command, blocked=blocked,
                  requests=[("GET", "/ping", ""), ("GET", "/openapi.json", "")],
                  env={**env, "CHORUS_PIPELINE": str(staged_pipeline)})
    assert Path(found["agent_file"]).is_relative_to(workdir), found["agent_file"]
    assert not outside_the_image(found, {"agent"}, workdir)
    assert found["app_type"] == "fastapi.applications.FastAPI"
    assert found["answers"]["GET /ping"][0] == 200, found["answers"]
    # The healthcheck's readiness route needs the lifespan's store (tests/api/test_readiness).
    status, body = found["answers"]["GET /openapi.json"]
    assert status == 200 and health in json.loads(body)["paths"], found["answers"]


# -- (e) ports, healthchecks, restart, dependencies ------------------------------------------


def test_only_the_agent_publishes_a_port() -> None:
    publishing = sorted(name for name, spec in SERVICES.items() if spec.get("ports"))
    assert publishing == ["agent"]
    # On the loopback interface unless AGENT_PUBLISH_ADDRESS says otherwise: an agent
    # reachable from the network should be a decision, not a default.
    assert [interpolate(str(p)) for p in SERVICES["agent"]["ports"]] == [
        f"127.0.0.1:{AGENT_PORT}:{AGENT_PORT}"]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_service_has_a_healthcheck_that_can_pass(service: str) -> None:
    check = SERVICES[service].get("healthcheck") or {}
    test = check.get("test")
    assert test and not check.get("disable") and test not in (["NONE"], "NONE"), (
        f"{service}: no healthcheck")
    if service == "mongo":
        assert "mongosh" in test and any("ping" in part for part in test)
        return
    port, path = healthcheck_url(test)
    assert test[0] == "CMD" and test[1] == "python", (
        f"{service}: the slim image has no curl; check with python")
    dockerfile = dockerfile_of(service)
    assert port == uvicorn_command(dockerfile).port, f"{service}: checks a port it does not use"
    assert path == ("/ready" if service == "agent" else "/health")
    assert healthcheck_url(dockerfile.healthcheck) == (port, path), (
        f"{dockerfile.path}: its HEALTHCHECK should check what compose checks")


@pytest.mark.parametrize("service", PIPELINE_SERVICES)
def test_service_restarts_and_is_private(service: str) -> None:
    spec = SERVICES[service]
    assert spec.get("restart") == "unless-stopped"
    assert not spec.get("ports"), f"{service} must not publish ports"
    assert DNS_LABEL.fullmatch(service), f"{service!r} is not usable as a host name"


def test_agent_waits_for_every_other_service_to_be_healthy() -> None:
    depends = SERVICES["agent"].get("depends_on")
    assert isinstance(depends, dict), "agent.depends_on must be a mapping with conditions"
    assert sorted(depends) == sorted(set(SERVICES) - {"agent"})
    not_healthy = {name: spec for name, spec in depends.items()
                   if (spec or {}).get("condition") != "service_healthy"}
    assert not not_healthy, f"use condition: service_healthy for {sorted(not_healthy)}"


def test_agent_uses_the_compose_mongo_and_pipeline() -> None:
    env = environment("agent")
    url = urlsplit(env["CHORUS_DB_URL"])
    assert url.scheme == "mongodb" and url.hostname == "mongo" and url.path.strip("/"), url
    assert env["CHORUS_PIPELINE"] == "/app/deploy/pipeline.compose.json"
    assert dockerfile_of("agent").workdir == "/app"


def test_mongo_keeps_its_data_in_a_named_volume() -> None:
    volumes = SERVICES["mongo"].get("volumes") or []
    named = [v.split(":")[0] for v in volumes if isinstance(v, str) and v.endswith(":/data/db")]
    assert named and not named[0].startswith((".", "/")), volumes
    assert named[0] in (COMPOSE.get("volumes") or {}), f"declare volume {named[0]} at the top"


# -- (f) the compose pipeline addresses services by their compose names -----------------------


def test_compose_pipeline_urls_use_compose_names_and_port_8000() -> None:
    problems = []
    for name, (group, entry) in containerised(load_pipeline(COMPOSE_PIPELINE)).items():
        url = urlsplit(entry["connector"]["url"])
        if (url.scheme, url.hostname, url.port, url.path) != ("http", name, SERVICE_PORT,
                                                              "/respond"):
            problems.append(f"services.{group}.{name}: {entry['connector']['url']} should be "
                            f"http://{name}:{SERVICE_PORT}/respond")
    assert not problems, "\n".join(problems)


def test_no_compose_pipeline_url_points_outside_compose() -> None:
    """A leftover 127.0.0.1 address in the compose pipeline points at the agent's own
    container; every pipeline URL host there must be a compose service."""
    hosts = {urlsplit(entry["connector"]["url"]).hostname
             for _, entry in pipeline_entries(load_pipeline(COMPOSE_PIPELINE)).values()
             if entry["connector"].get("url")}
    assert hosts <= set(PIPELINE_SERVICES), hosts - set(PIPELINE_SERVICES)
    assert not fnmatch.filter(hosts, "127.*") and "localhost" not in hosts


# -- (f) docs/deployment.md tells the truth about this compose file and the agent image -----

DEPLOYMENT_DOC = ROOT / "docs" / "deployment.md"


def doc_section(title: str) -> str:
    text = DEPLOYMENT_DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_the_docs_list_exactly_the_compose_containers_and_their_builds() -> None:
    section = doc_section("The containers")
    table = section[section.index("| compose service |"):]
    table = table[:table.index("\n\n")]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| ([^|]+) \|", table, flags=re.M)
    listed = dict(rows)
    stale = sorted(set(listed) - set(SERVICES))
    assert not stale, f"docs/deployment.md lists containers compose does not have: {stale}"
    # Every container the repository ships is described; one you add (`chorus new skill`)
    # may be, but need not.
    from tests.e2e.test_default_pipeline import REFERENCE

    shipped = INFRASTRUCTURE | set().union(*REFERENCE.values())
    missing = sorted(set(SERVICES) & shipped - set(listed))
    assert not missing, f"docs/deployment.md does not list compose's {missing}"
    assert shipped <= set(SERVICES), "the reference services are all in docker-compose.yml"
    for name, built in listed.items():
        spec = SERVICES[name]
        expected = (f"image `{spec['image']}`" if "image" in spec
                    else f"`{spec['build']['dockerfile']}`")
        assert built.strip() == expected, f"{name}: the docs say {built.strip()}"


def docs_docker_run() -> list[str]:
    """The ``docker run`` command of the docs' agent-image example, as arguments."""
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", DEPLOYMENT_DOC.read_text(), re.S)
                if "docker run" in b]
    command = block[block.index("docker run"):].replace("\\\n", " ").splitlines()[0]
    return shlex.split(command)


def test_the_agent_image_runs_without_compose_as_the_docs_show(tmp_path: Path) -> None:
    """The docs' `docker run` with the image's files: its published address, variables and
    mounts. The example's database host and generated key are placeholders, so the agent
    gets an SQLite file and a fixed key here; the mounted pipeline is the repository's."""
    args = docs_docker_run()
    assert args[:2] == ["docker", "run"] and args[-1] == "chorus-agent"
    published = [args[i + 1] for i, a in enumerate(args) if a == "-p"]
    assert published == [f"127.0.0.1:{AGENT_PORT}:{AGENT_PORT}"]
    env = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-e")
    from agent.settings import ENV_PREFIX, Settings

    assert set(env) <= {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    mounts = [args[i + 1].split(":") for i, a in enumerate(args) if a == "-v"]

    dockerfile = dockerfile_of("agent")
    workdir = stage(dockerfile, tmp_path / "image")
    for _, inside, *_ in mounts:
        target = tmp_path / "image" / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "pipeline.json", target)
    pipeline = env.get("CHORUS_PIPELINE", "pipeline.json")  # the agent's default
    staged = (tmp_path / "image" / pipeline.lstrip("/") if pipeline.startswith("/")
              else workdir / pipeline)
    assert staged.is_file(), f"the agent would read {pipeline}: neither in the image nor mounted"

    env |= {"CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
            "CHORUS_API_KEY": "0123456789abcdef0123456789abcdef"}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    blocked = blocked_modules(pyproject["project"]["dependencies"], own={"agent"})
    found = probe(workdir, uvicorn_command(dockerfile), blocked=blocked,
                  requests=[("GET", "/ping", "")], env=env)
    assert found["answers"]["GET /ping"][0] == 200, found["answers"]
