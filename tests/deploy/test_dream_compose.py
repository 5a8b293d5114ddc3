"""docs/dream.md's compose file and the ``chorus-agent-dream`` image, checked without a Docker
engine: the snippet as docs/dream.md prints it, merged over a Dream distribution's compose
files (their ``agent`` entry as Dream writes it), is valid for Debian's ``docker-compose``
and gives an agent that runs its image's own command, on this host's loopback only; the
image adds what Dream's formatters import to the agent image and changes nothing else that
the agent needs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from agent.settings import Settings
from tests.support.compose import docker_compose
from tests.support.dockerfiles import ROOT, parse_dockerfile
from tests.support.images import uvicorn_command
from tests.support.processes import COMMAND_TIMEOUT

DOCS = ROOT / "docs" / "dream.md"
DREAM_DOCKERFILE = ROOT / "deploy" / "agent-dream.Dockerfile"
AGENT_DOCKERFILE = ROOT / "deploy" / "agent.Dockerfile"
MARKER = "<!-- tests/deploy/test_dream_compose.py validates this block -->\n```yaml\n"
#: What Dream's state formatters import beyond the standard library (common.custom_requests).
FORMATTER_PACKAGES = {"requests", "sentry-sdk"}

#: Dream's docker-compose.yml and a distribution's override, as far as ``agent`` goes.
DREAM_BASE = {
    "version": "3.7",
    "services": {
        "agent": {
            "env_file": [".env"],
            "command": "sh -c 'bin/wait && python -m deeppavlov_agent.run'",
            "build": {"context": "./", "dockerfile": "dockerfile_agent"},
        },
        "mongo": {"command": "mongod", "image": "mongo:4.0.0"},
    },
}
DREAM_OVERRIDE = {
    "services": {
        "agent": {
            "command": "sh -c 'bin/wait && python -m deeppavlov_agent.run "
            "agent.pipeline_config=assistant_dists/deepy_base/pipeline_conf.json'",
            "volumes": [".:/dp-agent"],
            "ports": ["4242:4242"],
        },
        "spelling-preprocessing": {"image": "spelling", "ports": ["8074:8074"]},
    }
}


def snippet() -> str:
    text = DOCS.read_text()
    assert MARKER in text, "docs/dream.md lost the compose block this test validates"
    return text.split(MARKER, 1)[1].split("```", 1)[0]


def merged(tmp_path: Path, **env: str) -> dict[str, Any]:
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(DREAM_BASE))
    (tmp_path / "override.yml").write_text(yaml.safe_dump(DREAM_OVERRIDE))
    (tmp_path / "chorus-agent.yml").write_text(snippet())
    (tmp_path / ".env").write_text("DP_WIKIDATA_URL=http://wiki:8077/model\n")
    files = ["-f", "docker-compose.yml", "-f", "override.yml", "-f", "chorus-agent.yml"]
    result = subprocess.run(
        [docker_compose(), *files, "config"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def test_the_compose_snippet_runs_the_images_command_on_loopback_only(tmp_path: Path) -> None:
    service = merged(tmp_path)["services"]["chorus-agent"]
    assert service["image"] == "chorus-agent-dream"
    assert "command" not in service and "entrypoint" not in service and "build" not in service
    assert service["ports"] in (["127.0.0.1:4242:4242/tcp"], ["127.0.0.1:4242:4242"])
    assert service["volumes"][0].endswith(":/dp-agent:rw")
    env = service["environment"]
    assert env["DP_WIKIDATA_URL"] == "http://wiki:8077/model"  # Dream's .env reaches it
    Settings.model_validate(
        {k.removeprefix("CHORUS_").lower(): v for k, v in env.items() if k.startswith("CHORUS_")}
        | {"pipeline": "pipeline.json"}
    )
    # no key in the shell: none in the container (reads are open, as on dp-agent)
    assert env["CHORUS_API_KEY"] is None


def test_the_compose_snippet_passes_the_api_key_on(tmp_path: Path) -> None:
    key = "0123456789abcdef0123"
    env = merged(tmp_path, CHORUS_API_KEY=key)["services"]["chorus-agent"]["environment"]
    assert env["CHORUS_API_KEY"] == key


def test_the_dream_image_is_the_agent_image_with_the_formatters_packages() -> None:
    dream = parse_dockerfile(DREAM_DOCKERFILE)
    agent = parse_dockerfile(AGENT_DOCKERFILE)
    assert dream.base == "chorus-agent"
    assert dream.cmd == [] and dream.copies == [], "the agent image's command and files, unchanged"
    assert uvicorn_command(agent).module == "agent.api.app"
    assert dream.user == agent.user == "chorus"
    assert dream.workdir == "/dp-agent" and dream.env["PYTHONPATH"] == "/dp-agent"
    Settings(db_url=dream.env["CHORUS_DB_URL"])
    assert dream.env["CHORUS_DB_URL"].startswith("sqlite:////app/data/")
    installs = " ".join(
        line for line in DREAM_DOCKERFILE.read_text().splitlines() if line.startswith("RUN pip")
    )
    packages = set(re.findall(r'"([a-z-]+)[<>=]', installs))
    assert packages == FORMATTER_PACKAGES
    # docs/dream.md builds it as this file says
    assert "docker build -f deploy/agent-dream.Dockerfile -t chorus-agent-dream" in DOCS.read_text()
