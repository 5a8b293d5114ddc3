"""docs/dream.md's compose file and the ``chorus-agent-dream`` image, checked without a Docker
engine: the snippet as docs/dream.md prints it, merged over a Dream distribution's compose
files (their ``agent`` entry as Dream writes it), is valid for Debian's ``docker-compose``
and gives an agent that runs its image's own command, on this host's loopback only; the
image adds what Dream's formatters import to the agent image and changes nothing else that
the agent needs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from agent.cli.dream import MAX_OVERRIDE_BYTES, compose_block
from agent.cli.main import app as chorus
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
            "environment": {"WAIT_HOSTS": "spelling-preprocessing:8074"},
            "volumes": [".:/dp-agent"],
            "ports": ["4242:4242"],
        },
        "spelling-preprocessing": {"image": "spelling", "ports": ["8074:8074"]},
    }
}


def snippet(marker: str = MARKER) -> str:
    text = DOCS.read_text()
    assert marker in text, "docs/dream.md lost the compose block this test validates"
    return text.split(marker, 1)[1].split("```", 1)[0]


def merged(
    tmp_path: Path,
    block: str | None = None,
    override: dict[str, Any] = DREAM_OVERRIDE,
    more: tuple[str, ...] = (),
    **env: str,
) -> dict[str, Any]:
    """``docker-compose config`` of Dream's files, the agent's ``block`` (docs/dream.md's
    when not given) and ``more`` files already written in ``tmp_path``, run in a Dream
    checkout's place."""
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(DREAM_BASE))
    (tmp_path / "override.yml").write_text(yaml.safe_dump(override, allow_unicode=True))
    if block is not None or not (tmp_path / "chorus-agent.yml").exists():
        (tmp_path / "chorus-agent.yml").write_text(snippet() if block is None else block)
    (tmp_path / ".env").write_text(
        "DP_WIKIDATA_URL=http://wiki:8077/model\nFILE_SERVER_URL=http://files:3000\n"
    )
    (tmp_path / ".env_ru").write_text("DP_WIKIDATA_URL=http://wiki-ru:8077/model\n")
    files = ["-f", "docker-compose.yml", "-f", "override.yml", "-f", "chorus-agent.yml"]
    files += [arg for name in more for arg in ("-f", name)]
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


def test_the_compose_snippet_answers_as_agent_on_the_compose_network(tmp_path: Path) -> None:
    # services/speech (dream_voice) and other clients on the network post to http://agent:4242
    service = merged(tmp_path)["services"]["chorus-agent"]
    assert service["networks"]["default"]["aliases"] == ["agent"]


def test_the_compose_snippet_is_what_the_command_writes_for_deepy_base(tmp_path: Path) -> None:
    override = tmp_path / "assistant_dists" / "deepy_base" / "docker-compose.override.yml"
    override.parent.mkdir(parents=True)
    override.write_text(yaml.safe_dump(DREAM_OVERRIDE))
    assert compose_block(override) == yaml.safe_load(snippet())


def test_the_compose_snippet_passes_the_api_key_on(tmp_path: Path) -> None:
    key = "0123456789abcdef0123"
    env = merged(tmp_path, CHORUS_API_KEY=key)["services"]["chorus-agent"]["environment"]
    assert env["CHORUS_API_KEY"] == key


def test_the_telegram_block_runs_chorus_telegram_for_the_agent_with_dreams_settings(
    tmp_path: Path,
) -> None:
    marker = "<!-- tests/deploy/test_dream_compose.py validates this Telegram block -->\n```yaml\n"
    (tmp_path / "chorus-telegram.yml").write_text(snippet(marker))
    config = merged(tmp_path, more=("chorus-telegram.yml",), TG_TOKEN="123456:abc")
    bot = config["services"]["chorus-telegram"]
    assert bot["image"] == "chorus-agent-dream"
    assert bot["command"][-1] == "telegram"
    assert bot["environment"]["CHORUS_TELEGRAM_TOKEN"] == "123456:abc"
    assert bot["environment"]["FILE_SERVER_URL"] == "http://files:3000"  # from Dream's .env
    agent_url = bot["environment"]["CHORUS_TELEGRAM_AGENT_URL"]
    assert agent_url.split("//")[1].split(":")[0] in config["services"]  # a service name
    assert bot["healthcheck"] == {"test": ["NONE"]}  # how compose writes "disable: true"
    assert "ports" not in bot  # a client: it listens on nothing


def test_the_dream_image_is_the_agent_image_with_the_formatters_packages() -> None:
    dream = parse_dockerfile(DREAM_DOCKERFILE)
    agent = parse_dockerfile(AGENT_DOCKERFILE)
    assert dream.base == "chorus-agent"
    assert dream.cmd == [] and dream.copies == [], "the agent image's command and files, unchanged"
    assert uvicorn_command(agent).module == "agent.api.serve"
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


#: A non-English distribution's override as Dream writes them: the variables its agent's
#: formatters and connectors read, next to its start script's.
RUSSIAN_OVERRIDE = {
    "services": {
        "agent": {
            "command": "sh -c 'bin/wait && python -m deeppavlov_agent.run "
            "agent.pipeline_config=assistant_dists/ru_bot/pipeline_conf.json'",
            "environment": {
                "WAIT_HOSTS": "spelling-preprocessing-ru:8074, dff-template-skill:8120",
                "WAIT_HOSTS_TIMEOUT": "${WAIT_TIMEOUT:-1200}",
                "LANGUAGE": "RU",
                "FALLBACK_FILE": "fallbacks_ru.json",
                "ENABLE_NP_FACTS": 1,
                "ALWAYS_TURN_ON_ALL_SKILLS": 0,
                "GREETING": "${GREETING:-Привет}",
            },
        },
        "spelling-preprocessing-ru": {
            "env_file": [".env_ru"],
            "image": "spelling-ru",
            "ports": ["8074:8074"],
        },
    }
}


def compose_block_cli(*args: str, cwd: Path) -> Result:
    """``chorus dream compose-block ARGS`` run in ``cwd``: the command line's own parsing,
    exit code and output, in the test's process. A ``chorus`` process would cost a second
    or two of CPU importing the agent, for nothing these tests check (the installed
    command is started as a process in tests/cli/test_run.py and tests/dream)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.setattr(sys, "path", list(sys.path))  # the command puts its folder first
        return CliRunner().invoke(chorus, ["dream", "compose-block", *args])


def test_the_command_carries_the_overrides_agent_variables_over(tmp_path: Path) -> None:
    override = tmp_path / "assistant_dists" / "ru_bot" / "docker-compose.override.yml"
    override.parent.mkdir(parents=True)
    override.write_text(yaml.safe_dump(RUSSIAN_OVERRIDE, allow_unicode=True))
    written = compose_block_cli(
        "--override",
        str(override.relative_to(tmp_path)),
        "--output",
        "chorus-agent.yml",
        cwd=tmp_path,
    )
    assert written.exit_code == 0, written.stderr
    service = merged(tmp_path, override=RUSSIAN_OVERRIDE)["services"]["chorus-agent"]
    env = service["environment"]
    assert {k: env[k] for k in ("LANGUAGE", "FALLBACK_FILE", "GREETING")} == {
        "LANGUAGE": "RU",
        "FALLBACK_FILE": "fallbacks_ru.json",
        "GREETING": "Привет",  # compose still fills ${...} from the shell, with its default
    }
    assert env["ENABLE_NP_FACTS"] == "1" and env["ALWAYS_TURN_ON_ALL_SKILLS"] == "0"
    assert "WAIT_HOSTS" not in env and "WAIT_HOSTS_TIMEOUT" not in env
    assert env["CHORUS_PIPELINE"] == "/dp-agent/assistant_dists/ru_bot/pipeline_conf.json"
    assert env["DP_WIKIDATA_URL"] == "http://wiki:8077/model"  # .env still reaches it
    assert service["networks"]["default"]["aliases"] == ["agent"]
    assert "command" not in service and service["image"] == "chorus-agent-dream"


def test_the_command_reads_compose_list_environments(tmp_path: Path) -> None:
    override = tmp_path / "docker-compose.override.yml"
    agent = {"command": "python -m deeppavlov_agent.run", "environment": ["LANGUAGE=RU", "TOKEN"]}
    override.write_text(yaml.safe_dump({"services": {"agent": agent}}))
    env = compose_block(override)["services"]["chorus-agent"]["environment"]
    assert env["LANGUAGE"] == "RU" and env["TOKEN"] is None  # TOKEN: from the shell
    # no pipeline named in the command: the override's own folder's
    assert env["CHORUS_PIPELINE"] == f"/dp-agent/assistant_dists/{tmp_path.name}/pipeline_conf.json"


def test_the_command_refuses_a_file_without_an_agent_saying_what_to_name(tmp_path: Path) -> None:
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump({"services": {"mongo": {}}}))
    refused = compose_block_cli("--override", "docker-compose.yml", cwd=tmp_path)
    assert refused.exit_code == 2 and refused.stdout == ""
    assert "no services.agent entry" in refused.stderr
    assert "assistant_dists/NAME/docker-compose.override.yml" in refused.stderr


#: A few hundred bytes whose last alias is 10**9 strings once written out ("billion laughs").
LAUGHS = "\n".join(
    [
        'x0: &x0 ["lol"]',
        *(f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]" for n in range(1, 10)),
        "services:",
        "  agent:",
        "    command: *x9",
        "    environment: *x9",
    ]
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (LAUGHS, "found an alias (*name): aliases are not read here, write the value out"),
        (
            "services:\n  agent:\n    command: {run: agent}\n",
            "services.agent.command must be a string or a list of strings, not a dict",
        ),
        (
            "services:\n  agent:\n    command: [python, [-m, agent]]\n",
            "services.agent.command must be a string or a list of strings, not a list holding list",
        ),
        (
            "services:\n  agent:\n    environment: {LANGUAGE: [RU]}\n",
            "services.agent.environment: LANGUAGE must be a string, a number or a boolean",
        ),
        (
            "services:\n  agent:\n    command: agent\n" + "#" * MAX_OVERRIDE_BYTES + "\n",
            f"larger than {MAX_OVERRIDE_BYTES} bytes (MAX_OVERRIDE_BYTES)",
        ),
    ],
    ids=["billion-laughs", "command-mapping", "command-nested", "environment-list", "too-large"],
)
def test_a_hostile_override_is_refused_saying_why(tmp_path: Path, text: str, said: str) -> None:
    """Aliases are refused before anything expands them, the file is read up to a bound,
    and a value of the wrong type is named: an error and exit code 2, no traceback."""
    (tmp_path / "docker-compose.override.yml").write_text(text)
    refused = compose_block_cli("--override", "docker-compose.override.yml", cwd=tmp_path)
    assert refused.exit_code == 2, refused.stderr[-2000:]
    assert refused.stdout == ""
    assert said in refused.stderr
    assert "Traceback" not in refused.stderr
