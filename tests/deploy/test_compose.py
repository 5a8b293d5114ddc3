"""The docker-compose deployment, checked without a Docker engine.

* ``docker-compose config -q`` (Debian's docker-compose, installed by ``make test`` through
  ``tools/ensure.sh``) validates the file against the Compose schema. Without the binary the
  test is skipped, unless ``REQUIRE_DOCKER_COMPOSE=1``, which makes it a failure.
* The compose file, the compose pipeline (``deploy/pipeline.compose.json``) and
  ``pipeline.json`` agree: the same services, addressed by their compose names on port 8000.
* Every pipeline service builds the one ``deploy/service.Dockerfile``, its folder named by the
  ``SERVICE`` build argument; every ``COPY`` source exists (after ``.dockerignore``).
* Each image is *staged*: the files its ``COPY`` instructions would put in the image are copied
  to a temporary directory, and the module its ``CMD`` runs is imported there in a fresh
  interpreter. A service must import with nothing but its staged files and the distributions
  ``deploy/service-requirements.txt`` (and its own ``requirements.txt``) install; the agent must
  start from the environment compose gives it.

The readers of Dockerfiles, images and the compose file are in tests/support/.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import tomllib
from pathlib import Path, PurePosixPath
from subprocess import CompletedProcess
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement

from tests.support import compose
from tests.support.compose import (
    containerised,
    healthcheck_url,
    interpolate,
    load_compose,
    load_pipeline,
    pipeline_entries,
    run_docker_compose,
    without_targets,
)
from tests.support.dockerfiles import ROOT, Dockerfile, copy_problems, ignored, stage
from tests.support.images import (
    blocked_modules,
    normalise,
    outside_the_image,
    probe,
    requirement_lines,
    uvicorn_command,
)
from tests.support.views import view

COMPOSE_PIPELINE = ROOT / "deploy" / "pipeline.compose.json"
LOCAL_PIPELINE = ROOT / "pipeline.json"
SERVICE_REQUIREMENTS = ROOT / "deploy" / "service-requirements.txt"
SERVICE_DOCKERFILE = ROOT / "deploy" / "service.Dockerfile"

#: Compose services that are not pipeline services.
INFRASTRUCTURE = {"mongo", "agent"}
#: Every service container listens here; the pipeline addresses it so.
SERVICE_PORT = 8000
AGENT_PORT = 4242
#: A compose service name is a host name on the compose network.
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

COMPOSE = load_compose()
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
BUILT = sorted(name for name, spec in SERVICES.items() if "build" in spec)
PIPELINE_SERVICES = sorted(set(SERVICES) - INFRASTRUCTURE)


def environment(service: str) -> dict[str, str]:
    return compose.environment(SERVICES[service])


def dockerfile_of(service: str) -> Dockerfile:
    return compose.dockerfile_of(service, SERVICES[service])


# -- (a) the file is valid Compose -----------------------------------------------------------


@pytest.fixture(scope="module")
def compose_config() -> CompletedProcess[str]:
    """``docker-compose config``, run once for the tests that read it: it validates the file
    as ``config -q`` does, and prints it resolved (a docker-compose process is most of a
    second of CPU)."""
    return run_docker_compose("config")


def test_docker_compose_config_accepts_the_file(compose_config: CompletedProcess[str]) -> None:
    assert compose_config.returncode == 0, f"docker-compose config:\n{compose_config.stderr}"
    assert "variable is not set" not in compose_config.stderr, compose_config.stderr


def test_docker_compose_reads_the_file_as_this_test_does(
    compose_config: CompletedProcess[str],
) -> None:
    """The other tests read the YAML with PyYAML (anchors and ``<<`` merges resolved); the
    services and their shared settings must come out the same as docker-compose reads them."""
    result = compose_config
    assert result.returncode == 0, f"docker-compose config:\n{result.stderr}"
    resolved = yaml.safe_load(result.stdout)["services"]
    assert sorted(resolved) == sorted(SERVICES)
    for name, spec in SERVICES.items():
        assert resolved[name].get("restart") == spec.get("restart"), name
        assert resolved[name]["healthcheck"]["test"] == spec["healthcheck"]["test"], name
        assert sorted(resolved[name].get("depends_on") or {}) == sorted(
            spec.get("depends_on") or {}
        ), name


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


def test_compose_pipeline_is_the_local_pipeline_with_every_service_in_a_container() -> None:
    local, compose = load_pipeline(LOCAL_PIPELINE), load_pipeline(COMPOSE_PIPELINE)
    assert {n: g for n, (g, _) in pipeline_entries(compose).items()} == {
        n: g for n, (g, _) in pipeline_entries(local).items()
    }
    assert without_targets(compose) == without_targets(local), (
        f"{COMPOSE_PIPELINE.name} must be {LOCAL_PIPELINE.name} with only where each "
        "service runs changed"
    )
    in_the_agent = [
        n for n, (_, e) in pipeline_entries(compose).items() if "url" not in e["connector"]
    ]
    assert not in_the_agent, f"the agent's image does not carry {in_the_agent}: give each a URL"


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
        name for name, (_, entry) in entries.items() if entry.get("is_enabled", True)
    }


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
        f"{dockerfile.path}: add a USER that is not root"
    )


def test_dockerignore_keeps_local_state_and_tests_out() -> None:
    for path in (
        ".venv",
        ".git",
        ".cache",
        "data",
        "tests",
        "bench",
        "agent/__pycache__",
        "skills/greeting/test_app.py",
    ):
        assert ignored(path), f".dockerignore should exclude {path}"
    for path in (
        "agent/sdk/service.py",
        "pyproject.toml",
        "README.md",
        "deploy/pipeline.compose.json",
        "skills/greeting/app.py",
    ):
        assert not ignored(path), f".dockerignore must not exclude {path}"


# -- (d) what each Dockerfile runs imports from the image's files alone ------------------------


@pytest.mark.parametrize("service", PIPELINE_SERVICES)
def test_service_image_runs_its_module_with_the_sdk_only(service: str, tmp_path: Path) -> None:
    dockerfile = dockerfile_of(service)
    command = uvicorn_command(dockerfile)
    from agent.pipeline.kind import GROUP_FOLDERS

    pipeline_group, _ = pipeline_entries(load_pipeline(COMPOSE_PIPELINE))[service]
    # candidate annotators live in annotators/; a group name the map lacks fails as KeyError
    group = GROUP_FOLDERS[pipeline_group]  # type: ignore[index]
    assert command.module == f"{group}.{service}.app", (
        f"{service}: the pipeline's {pipeline_group}.{service} should run "
        f"{group}.{service}.app, not {command.module}"
    )
    assert dockerfile.path == SERVICE_DOCKERFILE, f"{service}: build deploy/service.Dockerfile"
    assert compose.build_of(service, SERVICES[service])["args"]["SERVICE"] == (
        f"{group}/{service}"
    ), f"{service}: the SERVICE build argument names its folder"
    assert command.port == SERVICE_PORT and not command.factory

    requirements = requirement_lines(SERVICE_REQUIREMENTS)
    extra = ROOT / group / service / "requirements.txt"
    if extra.exists():
        requirements += requirement_lines(extra)
    blocked = blocked_modules(requirements, own={"agent", group})
    workdir = stage(dockerfile, tmp_path / "image")
    dialog = view(
        "Hello, my name is Ann.",
        hypotheses=[
            {"skill_name": "greeting", "text": "Nice to meet you, Ann!", "confidence": 0.9}
        ],
    )
    found = probe(
        workdir,
        command,
        blocked=blocked,
        requests=[("GET", "/health", ""), ("POST", "/respond", json.dumps({"dialogs": [dialog]}))],
    )
    assert Path(found["module_file"]).is_relative_to(workdir), found["module_file"]
    assert Path(found["agent_file"]).is_relative_to(workdir), found["agent_file"]
    assert not outside_the_image(found, {"agent", group}, workdir)
    assert found["app_type"] == "fastapi.applications.FastAPI", (
        f"{command.module}.{command.attribute} is {found['app_type']}, not a FastAPI app"
    )
    assert found["answers"]["GET /health"][0] == 200, found["answers"]
    status, body = found["answers"]["POST /respond"]
    assert status == 200 and len(json.loads(body)) == 1, found["answers"]  # one per dialog

    outside_sdk = [
        m
        for m in found["imported"]
        if m.split(".")[0] == "agent"
        and m != "agent"
        and not (m == "agent.sdk" or m.startswith("agent.sdk."))
    ]
    assert not outside_sdk, f"{command.module} imports the agent beyond agent.sdk: {outside_sdk}"


def test_service_requirements_are_only_what_the_sdk_needs() -> None:
    names = {normalise(Requirement(r).name) for r in requirement_lines(SERVICE_REQUIREMENTS)}
    assert names == {
        "fastapi",
        "uvicorn",
        "pydantic",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floors = {
        normalise(Requirement(r).name): Requirement(r).specifier
        for r in pyproject["project"]["dependencies"]
    }
    for line in requirement_lines(SERVICE_REQUIREMENTS):
        requirement = Requirement(line)
        assert str(requirement.specifier) == str(floors[normalise(requirement.name)]), (
            f"{line}: use pyproject.toml's bound ({floors[normalise(requirement.name)]})"
        )


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
                f"{where}: {line}: use pyproject.toml's bound ({floors[name]})"
            )


def test_agent_image_starts_from_the_compose_environment(tmp_path: Path) -> None:
    dockerfile = dockerfile_of("agent")
    command = uvicorn_command(dockerfile)
    assert (command.module, command.attribute, command.factory) == (
        "agent.api.serve",
        "served_app",
        True,
    )
    assert command.port == AGENT_PORT

    from agent.settings import ENV_PREFIX, VARIABLES

    env = environment("agent")
    unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in VARIABLES)
    assert not unknown, f"the agent ignores these variables (typo?): {unknown}"

    workdir = stage(dockerfile, tmp_path / "image")
    image_root = tmp_path / "image"
    pipeline = env["CHORUS_PIPELINE"]
    assert PurePosixPath(pipeline).is_absolute() or pipeline.startswith("deploy/")
    staged_pipeline = (
        image_root / pipeline.lstrip("/") if pipeline.startswith("/") else (workdir / pipeline)
    )
    assert staged_pipeline.is_file(), f"CHORUS_PIPELINE={pipeline} is not in the image"
    assert staged_pipeline.read_text() == COMPOSE_PIPELINE.read_text()

    # `pip install .` runs in the WORKDIR: it needs pyproject.toml, and the readme it names
    # (without it setuptools only warns, and builds a package with no description).
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert (workdir / "pyproject.toml").is_file(), "copy pyproject.toml to the WORKDIR"
    # The agent depends on the service SDK's distribution, which `pip install ./sdk .` builds.
    assert (workdir / "sdk" / "pyproject.toml").is_file(), "copy sdk/pyproject.toml to sdk/"
    readme = pyproject["project"].get("readme")
    readme = readme.get("file") if isinstance(readme, dict) else readme
    assert readme is None or (workdir / readme).is_file(), f"copy {readme} next to pyproject.toml"
    blocked = blocked_modules(pyproject["project"]["dependencies"], own={"agent"})
    _, health = healthcheck_url(SERVICES["agent"]["healthcheck"]["test"])
    found = probe(
        workdir,
        command,
        blocked=blocked,
        requests=[("GET", "/ping", ""), ("GET", "/openapi.json", "")],
        env={**env, "CHORUS_PIPELINE": str(staged_pipeline)},
    )
    assert Path(found["agent_file"]).is_relative_to(workdir), found["agent_file"]
    assert not outside_the_image(found, {"agent"}, workdir)
    assert "fastapi.applications.FastAPI" in found["app_types"], found["app_type"]
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
        f"127.0.0.1:{AGENT_PORT}:{AGENT_PORT}"
    ]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_service_has_a_healthcheck_that_can_pass(service: str) -> None:
    check = SERVICES[service].get("healthcheck") or {}
    test = check.get("test")
    assert test and not check.get("disable") and test not in (["NONE"], "NONE"), (
        f"{service}: no healthcheck"
    )
    if service == "mongo":
        assert "mongosh" in test and any("ping" in part for part in test)
        return
    port, path = healthcheck_url(test)
    assert test[0] == "CMD" and test[1] == "python", (
        f"{service}: the slim image has no curl; check with python"
    )
    dockerfile = dockerfile_of(service)
    assert port == uvicorn_command(dockerfile).port, f"{service}: checks a port it does not use"
    assert path == ("/ready" if service == "agent" else "/health")
    assert healthcheck_url(dockerfile.healthcheck) == (port, path), (
        f"{dockerfile.path}: its HEALTHCHECK should check what compose checks"
    )


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
    not_healthy = {
        name: spec
        for name, spec in depends.items()
        if (spec or {}).get("condition") != "service_healthy"
    }
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
        if (url.scheme, url.hostname, url.port, url.path) != (
            "http",
            name,
            SERVICE_PORT,
            "/respond",
        ):
            problems.append(
                f"services.{group}.{name}: {entry['connector']['url']} should be "
                f"http://{name}:{SERVICE_PORT}/respond"
            )
    assert not problems, "\n".join(problems)


def test_no_compose_pipeline_url_points_outside_compose() -> None:
    """A leftover 127.0.0.1 address in the compose pipeline points at the agent's own
    container; every pipeline URL host there must be a compose service."""
    hosts = {
        urlsplit(entry["connector"]["url"]).hostname
        for _, entry in pipeline_entries(load_pipeline(COMPOSE_PIPELINE)).values()
        if entry["connector"].get("url")
    }
    assert hosts <= set(PIPELINE_SERVICES), hosts - set(PIPELINE_SERVICES)
    assert not fnmatch.filter(hosts, "127.*") and "localhost" not in hosts


# -- (f) docs/deployment.md tells the truth about this compose file and the agent image -----

DEPLOYMENT_DOC = ROOT / "docs" / "deployment.md"


def doc_section(title: str) -> str:
    text = DEPLOYMENT_DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_the_docs_list_exactly_the_compose_containers_and_their_builds() -> None:
    section = doc_section("The containers")
    table = section[section.index("| compose service |") :]
    table = table[: table.index("\n\n")]
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
        args = spec["build"].get("args", {}) if "build" in spec else {}
        expected = (
            f"image `{spec['image']}`"
            if "image" in spec
            else ", ".join(
                [
                    f"`{spec['build']['dockerfile']}`",
                    *(f"`{key}={value}`" for key, value in args.items()),
                ]
            )
        )
        assert built.strip() == expected, f"{name}: the docs say {built.strip()}"


def docs_docker_run() -> list[str]:
    """The ``docker run`` command of the docs' agent-image example, as arguments."""
    (block,) = [
        b
        for b in re.findall(r"```sh\n(.*?)```", DEPLOYMENT_DOC.read_text(), re.S)
        if "docker run" in b
    ]
    command = block[block.index("docker run") :].replace("\\\n", " ").splitlines()[0]
    return shlex.split(command)


def test_the_agent_image_runs_without_compose_as_the_docs_show(tmp_path: Path) -> None:
    """The docs' `docker run` with the image's files: its published address, variables and
    mounts. The example's database host and generated key are placeholders, so the agent
    gets an SQLite file and a fixed key here; the mounted pipeline is the one the docs say
    to start from."""
    args = docs_docker_run()
    assert args[:2] == ["docker", "run"] and args[-1] == "chorus-agent"
    published = [args[i + 1] for i, a in enumerate(args) if a == "-p"]
    assert published == [f"127.0.0.1:{AGENT_PORT}:{AGENT_PORT}"]
    env = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-e")
    from agent.settings import VARIABLES

    assert set(env) <= set(VARIABLES)
    mounts = [args[i + 1].split(":") for i, a in enumerate(args) if a == "-v"]

    dockerfile = dockerfile_of("agent")
    workdir = stage(dockerfile, tmp_path / "image")
    for _, inside, *_ in mounts:
        target = tmp_path / "image" / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(COMPOSE_PIPELINE, target)
    pipeline = env.get("CHORUS_PIPELINE", "pipeline.json")  # the agent's default
    staged = (
        tmp_path / "image" / pipeline.lstrip("/")
        if pipeline.startswith("/")
        else workdir / pipeline
    )
    assert staged.is_file(), f"the agent would read {pipeline}: neither in the image nor mounted"

    env |= {
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
        "CHORUS_API_KEY": "0123456789abcdef0123456789abcdef",
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    blocked = blocked_modules(pyproject["project"]["dependencies"], own={"agent"})
    found = probe(
        workdir,
        uvicorn_command(dockerfile),
        blocked=blocked,
        requests=[("GET", "/ping", "")],
        env=env,
    )
    assert found["answers"]["GET /ping"][0] == 200, found["answers"]
