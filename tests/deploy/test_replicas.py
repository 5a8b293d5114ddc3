"""Agent replicas behind a real load balancer, restarted one at a time under load.

Three agents (real processes) over one MongoDB wire server (FerretDB) behind Debian's nginx
running deploy/nginx/chorus.conf, the file docker-compose.replicas.yml ships, with only its
upstream servers and listen address replaced. Many users talk through nginx while each
agent in turn gets SIGTERM and is started again. Afterwards every acknowledged message is
stored exactly once, in the order it was sent, with its answer after it; the only client
error allowed is a documented 503.

nginx comes from ``tools/ensure.sh nginx`` (``make test`` runs it); without it the test is
skipped, unless ``REQUIRE_NGINX=1``, which makes it a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.sdk import DialogView, Service, SkillHypothesis
from tests.conftest import CLIENT_TIMEOUT, fresh_database, patient, service_entry
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT, wait_until_up
from tests.support.servers import serving

# Each test starts a whole stack of processes and kills or restarts part of it under load:
# one at a time (another waits), so that in `make test`'s parallel run two of them do not
# starve each other of CPU. A chain of its own, "restarts", beside the "stack" chain of the
# shipped stack and the benchmarks: two chains, each half as long as the one they made
# (docs/development.md, "Tests run in parallel").
pytestmark = pytest.mark.one_at_a_time("restarts")

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "nginx" / "chorus.conf"
OVERRIDE = ROOT / "docker-compose.replicas.yml"
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
API_KEY = "r" * 32
USERS = 24
MIN_MESSAGES = 4  # each user sends at least this many, and goes on while agents restart
MAX_MESSAGES = 40  # ... but never more (a bounded test even if restarts stall)
ATTEMPTS = 5  # a 503 is retried with the same Idempotency-Key, this many times


def nginx_or_skip() -> str:
    if os.access(NGINX, os.X_OK):
        return NGINX
    reason = f"{NGINX} not found: run `sh tools/ensure.sh nginx` (`make test` does)"
    if os.environ.get("REQUIRE_NGINX") == "1":
        pytest.fail(f"REQUIRE_NGINX=1 but {reason}")
    pytest.skip(reason)


echo = Service("echo")


@echo.skill
def repeat(dialog: DialogView) -> SkillHypothesis:
    return SkillHypothesis(text=f"You said: {dialog.human_utterance.text}", confidence=0.9)


def upstream_servers(site: str) -> list[str]:
    return re.findall(r"^\s*server\s+([\w.-]+:\d+)", site, flags=re.MULTILINE)


def nginx_config(folder: Path, listen: int, agents: list[int]) -> Path:
    """The shipped site with our agents and address, inside a minimal main config."""
    site = SITE.read_text()
    servers = upstream_servers(site)
    assert servers, f"{SITE}: no upstream servers"
    first = f"server {servers[0]}"
    ours = "\n".join(f"    server 127.0.0.1:{port} max_fails=0;" for port in agents)
    lines = [
        line
        for line in site.splitlines()
        if not re.match(r"^\s*server\s+[\w.-]+:\d+", line) or first in line
    ]
    site = "\n".join(ours if first in line else line for line in lines)
    assert "listen 8080;" in site
    site = site.replace("listen 8080;", f"listen 127.0.0.1:{listen};")
    temp = "\n".join(
        f"    {kind}_temp_path {folder}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    config = folder / "nginx.conf"
    config.write_text(
        f"worker_processes 1;\ndaemon off;\npid {folder}/nginx.pid;\n"
        f"{'user root;' if os.geteuid() == 0 else ''}\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n    access_log off;\n{temp}\n{site}\n}}\n"
    )
    return config


class Replica:
    """One agent process on a fixed port, so nginx finds it again after a restart."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.env = env
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "--factory",
                    "agent.api.app:create_app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                    "--no-access-log",
                ],
                env=self.env,
                stderr=log,
            )
        wait_until_up(f"http://127.0.0.1:{self.port}/ping", self.process)

    def stop(self) -> None:
        """SIGTERM, and wait: uvicorn finishes the requests in progress, then exits."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=COMMAND_TIMEOUT) in (0, -signal.SIGTERM), (
            self.log.read_text()
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def replicas(mongodb_url: str, tmp_path: Path) -> Iterator[tuple[str, list[Replica]]]:
    """Three agents over one database behind nginx; yields nginx's URL and the agents."""
    nginx = nginx_or_skip()
    with serving(echo.app) as skill:
        pipeline = tmp_path / "pipeline.json"
        pipeline.write_text(
            json.dumps(patient({"services": {"skills": {"echo": service_entry(skill.url)}}}))
        )
        env = {
            **os.environ,
            "CHORUS_DB_URL": fresh_database(mongodb_url),
            "CHORUS_PIPELINE": str(pipeline),
            "CHORUS_API_KEY": API_KEY,
            "CHORUS_LOG_LEVEL": "WARNING",
        }
        agents = [Replica(env, tmp_path / f"agent-{i}.log") for i in range(3)]
        listen = free_port()
        config = nginx_config(tmp_path, listen, [agent.port for agent in agents])
        balancer: subprocess.Popen[bytes] | None = None
        try:
            for agent in agents:
                agent.start()
            with (tmp_path / "nginx.log").open("ab") as log:
                balancer = subprocess.Popen(
                    [nginx, "-p", str(tmp_path), "-c", str(config), "-e", "stderr"], stderr=log
                )
            wait_until_up(f"http://127.0.0.1:{listen}/ping", balancer)
            yield f"http://127.0.0.1:{listen}", agents
        finally:
            if balancer is not None:
                balancer.terminate()
                balancer.wait(timeout=10)
            for agent in agents:
                agent.kill()


class Traffic:
    """What the users saw: their acknowledged messages in order, and every refusal."""

    def __init__(self) -> None:
        self.acknowledged: dict[str, list[str]] = {}
        self.unavailable = 0
        self.warm = asyncio.Event()  # enough turns went through: start restarting
        self.restarted = asyncio.Event()  # every agent was restarted once

    def ack(self, user: str, text: str) -> None:
        self.acknowledged.setdefault(user, []).append(text)
        if sum(map(len, self.acknowledged.values())) >= USERS:
            self.warm.set()


async def talk(client: httpx.AsyncClient, user: str, traffic: Traffic) -> None:
    """One user, one message after the other, each sent until it is answered."""
    for n in range(MAX_MESSAGES):
        if n >= MIN_MESSAGES and traffic.restarted.is_set():
            return
        text = f"{user} says {n}"
        for _ in range(ATTEMPTS):
            reply = await client.post(
                "/",
                json={"user_id": user, "payload": text},
                headers={"Idempotency-Key": f"{user}-{n}"},
            )
            if reply.status_code != 503:
                break
            traffic.unavailable += 1
        assert reply.status_code == 200, f"{user}, message {n}: {reply.status_code} {reply.text}"
        assert reply.json()["response"] == f"You said: {text}"
        traffic.ack(user, text)


async def restart_one_at_a_time(agents: list[Replica], traffic: Traffic) -> None:
    await traffic.warm.wait()
    for agent in agents:
        await asyncio.to_thread(agent.stop)
        await asyncio.to_thread(agent.start)
    traffic.restarted.set()


async def drive(base: str, agents: list[Replica]) -> Traffic:
    traffic = Traffic()
    limits = httpx.Limits(max_connections=USERS)
    async with (
        httpx.AsyncClient(base_url=base, timeout=CLIENT_TIMEOUT, limits=limits) as client,
        asyncio.TaskGroup() as group,
    ):
        group.create_task(restart_one_at_a_time(agents, traffic))
        for i in range(USERS):
            group.create_task(talk(client, f"user-{i}", traffic))
    return traffic


def test_every_acknowledged_turn_is_stored_once_in_order_across_rolling_restarts(
    replicas: tuple[str, list[Replica]],
) -> None:
    base, agents = replicas
    traffic = asyncio.run(drive(base, agents))
    assert traffic.restarted.is_set()
    assert all(agent.process is not None and agent.process.poll() is None for agent in agents)
    with httpx.Client(base_url=base, timeout=30, headers={"X-API-Key": API_KEY}) as client:
        for user, sent in traffic.acknowledged.items():
            dialogs = client.get(f"/api/user/{user}")
            assert dialogs.status_code == 200, dialogs.text
            assert len(dialogs.json()) == 1, f"{user}: one open dialog throughout"
            utterances: list[dict[str, Any]] = dialogs.json()[0]["utterances"]
            humans = [u["text"] for u in utterances if u["speaker"] == "human"]
            assert humans == sent, f"{user}: stored {humans}, acknowledged {sent}"
            assert [u["speaker"] for u in utterances] == ["human", "bot"] * len(sent)
            assert [u["text"] for u in utterances if u["speaker"] == "bot"] == [
                f"You said: {text}" for text in sent
            ]
    assert sum(map(len, traffic.acknowledged.values())) >= USERS * MIN_MESSAGES
    print(
        f"{sum(map(len, traffic.acknowledged.values()))} turns, "
        f"{traffic.unavailable} answered 503 and retried"
    )


# -- the compose override that runs the same thing in containers ----------------------------


def test_the_compose_override_puts_every_replica_behind_the_load_balancer() -> None:
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    override = yaml.safe_load(OVERRIDE.read_text())["services"]
    replicas = sorted(name for name in override if name.startswith("agent-"))
    assert len(replicas) >= 2
    upstreams = {server.split(":")[0] for server in upstream_servers(SITE.read_text())}
    assert upstreams == {"agent", *replicas}, "nginx must balance over exactly the agents"
    for name in replicas:
        replica = override[name]
        assert replica["build"] == base["agent"]["build"], f"{name}: the agent's image"
        assert replica["environment"] == base["agent"]["environment"], (
            f"{name}: the agent's environment, so replicas behave alike"
        )
        assert "ports" not in replica, f"{name}: reached through the load balancer only"
        assert "/ready" in " ".join(replica["healthcheck"]["test"])
    balancer = override["lb"]
    assert balancer["image"].split(":")[0] == "nginx", "the official nginx image"
    assert f"./{SITE.relative_to(ROOT)}:/etc/nginx/conf.d/default.conf:ro" in balancer["volumes"]


@pytest.fixture(scope="module")
def both_files_config() -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` of the main file and the override together, as an operator
    runs them: once for the tests that read it (it validates them as ``config -q`` does)."""
    from tests.support.compose import docker_compose, required_variables

    return subprocess.run(
        [
            docker_compose(),
            "--file",
            str(ROOT / "docker-compose.yml"),
            "--file",
            str(OVERRIDE),
            "--project-directory",
            str(ROOT),
            "config",
        ],
        cwd=ROOT,
        env={**os.environ, **required_variables()},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def test_docker_compose_accepts_the_override_with_the_main_file(
    both_files_config: subprocess.CompletedProcess[str],
) -> None:
    result = both_files_config
    assert result.returncode == 0, f"docker-compose config:\n{result.stderr}"
    assert "variable is not set" not in result.stderr, result.stderr


def test_the_override_publishes_only_on_this_hosts_loopback(
    both_files_config: subprocess.CompletedProcess[str],
) -> None:
    """README and docs/deployment.md promise nothing is published beyond 127.0.0.1: the
    ports as docker-compose resolves the two files together say so too."""
    result = both_files_config
    assert result.returncode == 0, f"docker-compose config:\n{result.stderr}"
    services = yaml.safe_load(result.stdout)["services"]
    published = {
        name: [str(port) for port in spec.get("ports", [])] for name, spec in services.items()
    }
    published = {name: ports for name, ports in published.items() if ports}
    assert published == {
        "agent": ["127.0.0.1:4242:4242/tcp"],
        "lb": ["127.0.0.1:8080:8080/tcp"],
    }
