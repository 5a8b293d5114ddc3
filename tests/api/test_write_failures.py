"""A database that fails mid-turn, an agent that dies holding a message id, a full disk:
the client gets a 503 it can retry, and the retry is answered once and stored once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent.api.app import create_app
from agent.settings import Settings
from tests.api.test_concurrent_messages import gated_skill
from tests.api.test_crash_recovery import write_pipeline
from tests.conftest import service_entry
from tests.support.mongo_server import mongodb_required, running_ferretdb, unavailable_reason
from tests.support.processes import agent_process
from tests.support.servers import ServerThread, serving

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

Services = Callable[[FastAPI], ServerThread]


def texts(client: httpx.Client | str, user: str) -> list[str]:
    if isinstance(client, str):
        dialogs = httpx.get(f"{client}/api/user/{user}", timeout=30).json()
    else:
        dialogs = client.get(f"/api/user/{user}").json()
    return [u["text"] for u in dialogs[-1]["utterances"]]


def send_in_background(post: Callable[[], httpx.Response]) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(post())
        except httpx.TransportError as exc:
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, results


def until_not_busy(post: Callable[[], httpx.Response], timeout: float = 30.0) -> httpx.Response:
    """Retry as a client told "retry shortly" would (409 or 503 with Retry-After)."""
    deadline = time.monotonic() + timeout
    while True:
        response = post()
        if response.status_code not in (409, 503) or time.monotonic() > deadline:
            return response
        time.sleep(float(response.headers.get("retry-after", "1")) / 10)


def test_a_retry_after_a_failed_write_answers_the_stored_message_once_sqlite(
    services: Services,
    tmp_path: Path,
) -> None:
    """Another process holds the SQLite file's write lock when the turn ends: the client
    gets a 503, and its retry (no message id) answers the stored utterance instead of
    storing it again."""
    arrived, gate = threading.Event(), threading.Event()
    skill = services(gated_skill(arrived, gate))
    database = tmp_path / "chorus.db"
    pipeline = write_pipeline(
        tmp_path / "pipeline.json", {"skill": service_entry(skill.url, timeout=20)}
    )
    app = create_app(
        Settings(db_url=f"sqlite:///{database}", pipeline=Path(pipeline), queue_lease=1.0)
    )
    with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
        first = lambda: client.post("/", json={"user_id": "ann", "payload": "first"})  # noqa: E731
        thread, results = send_in_background(first)
        assert arrived.wait(30), "the message never reached the skill"
        locker = sqlite3.connect(database, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        gate.set()
        thread.join(30)
        (failed,) = results
        assert failed.status_code == 503 and failed.headers["retry-after"].isdigit()
        locker.execute("ROLLBACK")
        locker.close()
        retried = until_not_busy(first)
        assert retried.status_code == 200, retried.text
        assert retried.json()["response"] == "answer to first"
        assert texts(client, "ann") == ["first", "answer to first"]


@pytest.mark.skipif(
    unavailable_reason() is not None and not mongodb_required(), reason=unavailable_reason() or ""
)
def test_a_retry_after_the_database_went_away_answers_the_stored_message_once_mongodb(
    services: Services,
    tmp_path: Path,
) -> None:
    """The MongoDB server stops mid-turn: 503; it comes back and the client retries with
    the same message id: one human utterance, one answer."""
    arrived, gate = threading.Event(), threading.Event()
    skill = services(gated_skill(arrived, gate))
    pipeline = write_pipeline(
        tmp_path / "pipeline.json", {"skill": service_entry(skill.url, timeout=20)}
    )
    with running_ferretdb() as db:
        app = create_app(
            Settings(db_url=f"{db.url}chorus_retry", pipeline=Path(pipeline), queue_lease=1.0)
        )
        with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
            first = lambda: client.post(  # noqa: E731
                "/", json={"user_id": "ann", "payload": "first"}, headers={"Idempotency-Key": "m-1"}
            )
            thread, results = send_in_background(first)
            assert arrived.wait(30), "the message never reached the skill"
            db.stop()
            gate.set()
            thread.join(30)
            (failed,) = results
            assert failed.status_code == 503 and failed.headers["retry-after"].isdigit()
            db.start()
            retried = until_not_busy(first)
            assert retried.status_code == 200, retried.text
            assert retried.json()["response"] == "answer to first"
            assert until_not_busy(first).json() == retried.json()  # answered once
            assert texts(client, "ann") == ["first", "answer to first"]


def test_a_dead_agents_message_id_is_answered_by_a_retry(
    services: Services,
    tmp_path: Path,
    db_url: str,
) -> None:
    """An agent killed mid-turn holds a claim nobody gives up: its lease runs out and the
    client's retry runs the turn (once); the same id with another message is a 422."""
    arrived, gate = threading.Event(), threading.Event()
    skill = services(gated_skill(arrived, gate))
    env = {
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "pipeline.json", {"skill": service_entry(skill.url, timeout=20)}
        ),
        "CHORUS_DB_URL": db_url,
        "CHORUS_QUEUE_LEASE": "1",
    }
    message = {"user_id": "ann", "payload": "first", "message_id": "m-1"}
    try:
        with agent_process(env) as (base, agent):
            thread, results = send_in_background(
                lambda: httpx.post(f"{base}/", json=message, timeout=30)
            )
            assert arrived.wait(30), "the message never reached the skill"
            agent.send_signal(signal.SIGKILL)
            agent.wait()
            thread.join(30)
            assert isinstance(results[0], httpx.TransportError)
    finally:
        gate.set()
    with agent_process(env) as (base, _):
        retried = until_not_busy(lambda: httpx.post(f"{base}/", json=message, timeout=30))
        assert retried.status_code == 200, retried.text
        assert retried.json()["response"] == "answer to first"
        reused = httpx.post(f"{base}/", json={**message, "payload": "other"}, timeout=30)
        assert reused.status_code == 422
        assert "m-1" in reused.json()["message"] and "different message" in reused.text
        assert texts(base, "ann") == ["first", "answer to first"]


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {mounted.stderr}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with filler.open("wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
            os.fsync(out.fileno())
    return filler


def test_a_full_disk_is_a_503_and_nothing_is_lost(services: Services, tmp_path: Path) -> None:
    from tests.support.services import fixed_skill

    skill = services(fixed_skill("echo", "ok", 0.5))
    with small_disk(tmp_path / "disk", "4m") as disk:
        env = {
            "CHORUS_PIPELINE": write_pipeline(
                tmp_path / "pipeline.json", {"echo": service_entry(skill.url)}
            ),
            "CHORUS_DB_URL": f"sqlite:///{disk}/chorus.db",
            "CHORUS_QUEUE_LEASE": "1",
        }
        with agent_process(env) as (base, _):
            hello = httpx.post(f"{base}/", json={"user_id": "ann", "payload": "hello"}, timeout=30)
            assert hello.status_code == 200
            filler = fill(disk)
            # a large extra field makes the write grow the files on the full disk
            big = {"user_id": "ann", "payload": "again", "notes": "n" * 1_000_000}
            full = httpx.post(f"{base}/", json=big, timeout=30)
            assert full.status_code == 503, full.text
            assert full.headers["retry-after"].isdigit()
            assert "database" in full.json()["message"]
            filler.unlink()
            retried = until_not_busy(lambda: httpx.post(f"{base}/", json=big, timeout=30))
            assert retried.status_code == 200, retried.text
            assert texts(base, "ann") == ["hello", "ok", "again", "ok"]
            assert json.loads(json.dumps(retried.json()))["response"] == "ok"


def test_an_erased_users_text_does_not_linger_in_the_sqlite_files(
    services: Services,
    tmp_path: Path,
) -> None:
    from tests.support.services import fixed_skill

    skill = services(fixed_skill("echo", "ok", 0.5))
    database = tmp_path / "chorus.db"
    pipeline = write_pipeline(tmp_path / "pipeline.json", {"echo": service_entry(skill.url)})
    app = create_app(Settings(db_url=f"sqlite:///{database}", pipeline=Path(pipeline)))
    secret = "my card number is 4929-SECRET-7781"
    with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
        assert client.post("/", json={"user_id": "leaver", "payload": secret}).status_code == 200
        assert client.post("/", json={"user_id": "stayer", "payload": "hi"}).status_code == 200

        def files() -> list[Path]:
            return [p for p in tmp_path.iterdir() if p.name.startswith("chorus.db")]

        assert any(secret.encode() in p.read_bytes() for p in files())  # stored at first
        assert client.delete("/api/user/leaver").status_code == 204
        assert files() and all(secret.encode() not in p.read_bytes() for p in files())
        assert client.post("/", json={"user_id": "stayer", "payload": "hi"}).status_code == 200


def test_an_unexpected_error_closes_the_connection_and_the_next_request_works(
    services: Services,
    tmp_path: Path,
) -> None:
    from tests.support.services import fixed_skill

    skill = services(fixed_skill("echo", "ok", 0.5))
    pipeline = write_pipeline(tmp_path / "pipeline.json", {"echo": service_entry(skill.url)})
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/c.db", pipeline=Path(pipeline)))

    async def broken() -> None:  # a bug anywhere in a route
        raise RuntimeError("a bug")

    app.add_api_route("/broken", broken)
    with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
        failed = client.get("/broken")
        assert failed.status_code == 500
        assert failed.json() == {
            "error": "internal_error",
            "message": "internal error; it is logged on the agent",
            "fields": [],
        }
        assert failed.headers["connection"] == "close"
        assert client.post("/", json={"user_id": "u", "payload": "hi"}).status_code == 200


def test_a_write_the_database_refuses_is_a_500_that_says_so_and_closes_the_connection_sqlite(
    services: Services,
    tmp_path: Path,
) -> None:
    """The utterances' table dropped under the running agent (an operator's mistake):
    ``POST /`` gets the 500 that says the turn was not stored, on a connection then closed,
    whether it asked for one reply or for the turn's events, and the agent still answers
    what does not write."""
    from tests.support.services import fixed_skill

    skill = services(fixed_skill("echo", "ok", 0.5))
    database = tmp_path / "chorus.db"
    pipeline = write_pipeline(tmp_path / "pipeline.json", {"echo": service_entry(skill.url)})
    app = create_app(Settings(db_url=f"sqlite:///{database}", pipeline=Path(pipeline)))
    with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
        assert client.post("/", json={"user_id": "u", "payload": "hi"}).status_code == 200
        with contextlib.closing(sqlite3.connect(database)) as operator:
            operator.execute("DROP TABLE utterances")
            operator.commit()
        refused = client.post("/", json={"user_id": "u", "payload": "hi again"})
        assert refused.status_code == 500
        assert refused.json() == {
            "error": "internal_error",
            "message": "the database refused to store this turn; it was not stored",
            "fields": [],
        }
        assert refused.headers["connection"] == "close"
        streamed = client.post(
            "/",
            json={"user_id": "u", "payload": "hi, streamed"},
            headers={"Accept": "text/event-stream"},
        )  # refused before its first event: the same 500, not a stream
        assert streamed.status_code == 500
        assert streamed.json() == refused.json()
        assert streamed.headers["connection"] == "close"
        assert client.get("/ping").status_code == 200


def test_the_served_agent_closes_a_connection_that_never_sends_a_request(
    services: Services,
    tmp_path: Path,
) -> None:
    """``python -m agent.api.serve`` (the image's command, and ``chorus run``'s server):
    an idle socket is closed after the keep-alive timeout instead of being held for ever."""
    import socket
    import sys

    from tests.support.ports import free_port
    from tests.support.processes import wait_until_up
    from tests.support.services import fixed_skill

    skill = services(fixed_skill("echo", "ok", 0.5))
    port = free_port()
    env = {
        **os.environ,
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "pipeline.json", {"echo": service_entry(skill.url)}
        ),
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
    }
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent.api.serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(f"{base}/ping", agent)
        with socket.create_connection(("127.0.0.1", port)) as idle:
            idle.settimeout(30)  # uvicorn's keep-alive timeout is 5 s
            assert idle.recv(1) == b"", "the idle connection was not closed"
        answer = httpx.post(f"{base}/", json={"user_id": "ann", "payload": "hi"}, timeout=30)
        assert answer.status_code == 200 and answer.json()["response"] == "ok"
    finally:
        agent.terminate()
        agent.wait(30)
