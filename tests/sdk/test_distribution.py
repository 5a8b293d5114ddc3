"""The SDK as its own wheel, ``chorus-sdk``: a team outside this repository installs it
alone (not the agent's store, telemetry or command line), serves a skill the agent calls,
and tests it with ``agent.sdk.testing``; installed beside the full ``chorus``, the two
wheels share no file.

The wheel is built as ``make sdk-wheel`` builds it (tools/build_sdk.py) and installed in a
fresh virtual environment with its dependencies at constraints.txt's versions (by uv, as
`make install` installs, from its cache when they are there). The skill is a file in a
temporary folder, served by uvicorn from that environment; the agent is this repository's,
in the test's own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import AgentFactory, service_entry
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT, unmeasured_environment, wait_until_up

# Building a wheel and an environment keeps the CPUs busy, as the copies of the scaffold
# tests do. The first test also pays for both (pip resolving and unpacking some twenty
# packages), which a busy machine can stretch to minutes: 600 s, as for those copies.
pytestmark = [pytest.mark.one_at_a_time("copies"), pytest.mark.timeout(600)]
#: The bound on one pip command (a build, an install): a wait for it to end, far above it.
PIP_TIMEOUT = 2 * COMMAND_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]

#: The agent's dependencies a service author should not have to install. (OpenTelemetry's
#: API, without its SDK or exporters, comes with FastAPI itself.)
HEAVY = {
    "chorus",
    "pymongo",
    "scipy",
    "typer",
    "rich",
    "aiohttp",
    "prometheus-client",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
}

#: A skill as a team would write it in its own repository.
SKILL = """\
from agent.sdk import DialogView, Service, SkillHypothesis

service = Service("outside")


@service.skill
def answer(dialog: DialogView) -> list[SkillHypothesis]:
    return [SkillHypothesis(text=f"outside heard: {dialog.human_utterance.text}", confidence=0.9)]


app = service.app
"""

#: Its test, with the SDK's in-process client; prints what it saw for this test to check.
CHECK = """\
import importlib.metadata, json, sys

import agent.sdk
from agent.sdk.testing import ServiceClient, view

from outside_skill import service

with ServiceClient(service) as client:
    health = client.health()
    (hypotheses,) = client.respond(view("Hello there"))
print(json.dumps({
    "health": health,
    "hypotheses": hypotheses,
    "sdk_file": agent.sdk.__file__,
    "version": importlib.metadata.version("chorus-sdk"),
    "modules": sorted(sys.modules),
}))
"""


def run(*command: str | Path, cwd: Path | None = None, timeout: float = COMMAND_TIMEOUT) -> str:
    """The command's output; a failure shows its own."""
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=unmeasured_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if ".dist-info/" not in name}


@pytest.fixture(scope="module")
def sdk_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, ROOT / "tools" / "build_sdk.py", "--out", out, timeout=PIP_TIMEOUT)
    return Path(built.strip())


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The other team's repository: a skill and its test, nothing of this one."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "outside_skill.py").write_text(SKILL)
    (folder / "check_skill.py").write_text(CHECK)
    return folder


@pytest.fixture(scope="module")
def sdk_python(sdk_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment's Python with the SDK wheel (and its testing extra) alone."""
    venv = tmp_path_factory.mktemp("sdk-venv")
    # By uv, which `make install` installs with: the environment and the same wheel and pins
    # as venv and pip would make, in a tenth of their CPU (pip's resolving and ensurepip's
    # copy of pip were most of this module's time).
    run(sys.executable, "-m", "uv", "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    constraints = str(ROOT / "constraints.txt")
    install: list[str | Path] = ["pip", "install", "--quiet", "--python", python, "-c", constraints]
    run(sys.executable, "-m", "uv", *install, f"{sdk_wheel}[testing]", timeout=PIP_TIMEOUT)
    return python


@contextmanager
def served(python: Path, folder: Path, target: str) -> Iterator[str]:
    """``uvicorn target`` by ``python`` in ``folder`` (so the repository is not on its
    path), on a port from the tests' allocator; yields its base URL."""
    port = free_port()
    command = [str(python), "-m", "uvicorn", target, "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=folder, env=unmeasured_environment())
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base + "/health", process)
        yield base
    finally:
        process.kill()
        process.wait()


def test_the_wheel_holds_the_sdk_alone_at_the_agents_version(sdk_wheel: Path) -> None:
    import agent

    assert sdk_wheel.name == f"chorus_sdk-{agent.__version__}-py3-none-any.whl"
    files = wheel_files(sdk_wheel)
    assert files == {
        path.relative_to(ROOT).as_posix() for path in (ROOT / "agent" / "sdk").glob("*.py")
    }
    with zipfile.ZipFile(sdk_wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        required = [
            line.removeprefix("Requires-Dist: ")
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist: ") and "extra ==" not in line
        ]
    assert sorted(r.split(">=")[0] for r in required) == ["fastapi", "pydantic", "uvicorn"]


def test_an_environment_with_the_sdk_alone_has_none_of_the_agents_weight(
    sdk_python: Path,
) -> None:
    listed = json.loads(
        run(sys.executable, "-m", "uv", "pip", "list", "--python", sdk_python, "--format=json")
    )
    names = {entry["name"].lower().replace("_", "-") for entry in listed}
    assert {"chorus-sdk", "fastapi", "pydantic", "uvicorn", "httpx"} <= names
    assert not names & HEAVY, f"the SDK's environment holds {sorted(names & HEAVY)}"


def test_agent_sdk_testing_runs_a_skills_test_there(sdk_python: Path, outside: Path) -> None:
    import agent

    seen = json.loads(run(sdk_python, outside / "check_skill.py", cwd=outside))
    assert seen["hypotheses"][0]["text"] == "outside heard: Hello there"
    assert seen["health"] == {"status": "ok", "service": "outside", "role": "skill"}
    # The wheel's SDK, not this repository's, and at the agent's version.
    assert Path(seen["sdk_file"]).is_relative_to(sdk_python.parent.parent)
    assert seen["version"] == agent.__version__
    assert not [m for m in seen["modules"] if m.startswith(("opentelemetry.sdk", "pymongo"))]


def test_asking_for_traces_without_the_tracing_extra_says_what_to_install(
    sdk_python: Path, outside: Path
) -> None:
    result = subprocess.run(
        [str(sdk_python), "-c", "import outside_skill"],
        cwd=outside,
        env={**unmeasured_environment(), "OTEL_TRACES_EXPORTER": "console"},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    assert result.returncode != 0
    assert "chorus-sdk[tracing]" in result.stderr, result.stderr


def test_the_agent_answers_with_a_skill_served_from_that_environment(
    sdk_python: Path, outside: Path, agent: AgentFactory
) -> None:
    with served(sdk_python, outside, "outside_skill:app") as url:
        client = agent({"services": {"skills": {"outside": service_entry(url)}}})
        reply = client.post("/", json={"user_id": "u", "payload": "roll a die"}).json()
    assert reply["response"] == "outside heard: roll a die"
    assert reply["active_skill"] == "outside"


def test_beside_the_full_agent_no_file_belongs_to_both(sdk_wheel: Path, tmp_path: Path) -> None:
    """The agent's wheel leaves agent/sdk/ to the SDK's, on which it depends at its own
    version: pip never has two owners for one file, whichever is installed or removed."""
    import agent

    staged = tmp_path / "chorus"  # what the agent's image builds its wheel from
    shutil.copytree(ROOT / "agent", staged / "agent", ignore=shutil.ignore_patterns("__pycache__"))
    for source in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / source, staged / source)
    out = tmp_path / "dist"
    # By uv, as tools/build_sdk.py builds the SDK's: the wheel pip builds, for a quarter of
    # its CPU.
    build: list[str | Path] = ["build", "--quiet", "--wheel", "--out-dir", out, staged]
    run(sys.executable, "-m", "uv", *build, timeout=PIP_TIMEOUT)
    (chorus_wheel,) = out.glob("chorus-*.whl")
    agent_files, sdk_files = wheel_files(chorus_wheel), wheel_files(sdk_wheel)
    assert not agent_files & sdk_files
    assert "agent/__init__.py" in agent_files and "agent/sdk/service.py" in sdk_files
    with zipfile.ZipFile(chorus_wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = archive.read(metadata).decode().splitlines()
    assert f"Requires-Dist: chorus-sdk=={agent.__version__}" in requires
