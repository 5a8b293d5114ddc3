"""Two processes on one SQLite file (docs/storage.md allows it): while another process holds
the write lock, the agent's loop keeps answering; the waiting turn is stored once the lock is
free, or answered 503 with Retry-After when it is held past the store's budget."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx

from agent.api.app import create_app
from agent.settings import Settings
from skills.greeting.app import app as greeting_app
from tests.conftest import service_entry
from tests.support.servers import serving

#: Another process writing to the file: takes the write lock, says so, holds it until told.
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


@contextmanager
def lock_held(path: Path) -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "locked"
            yield holder
        finally:
            if holder.poll() is None:
                holder.stdin.write("\n")
                holder.stdin.flush()
            holder.wait(timeout=10)


def release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.write("\n")
    holder.stdin.flush()
    holder.wait(timeout=10)


@contextmanager
def agent_on(path: Path) -> Iterator[httpx.Client]:
    with serving(greeting_app) as skill:
        pipeline = path.parent / "pipeline.json"
        pipeline.write_text(
            json.dumps({"services": {"skills": {"greeting": service_entry(skill.url)}}})
        )
        app = create_app(Settings(db_url=f"sqlite:///{path}", pipeline=pipeline))
        with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
            yield client


def turn_waiting(client: httpx.Client, post: Future[httpx.Response]) -> bool:
    """Whether the turn has started (it counts in /metrics) while it is not answered."""
    while not post.done():
        metrics = client.get("/metrics").text
        if "\nchorus_turns_in_flight 1.0\n" in metrics:
            return True
    return False


def test_the_loop_answers_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "chorus.db"
    with agent_on(path) as client, ThreadPoolExecutor(1) as pool:
        earlier = client.post("/", json={"user_id": "bob", "payload": "Hello"}).json()
        with lock_held(path) as holder:
            post = pool.submit(client.post, "/", json={"user_id": "ann", "payload": "Hello"})
            assert turn_waiting(client, post)
            # Ann's turn waits for the lock; the agent still answers others meanwhile.
            assert client.get("/ping").json() == "pong"
            assert client.get(f"/api/dialogs/{earlier['dialog_id']}").status_code == 200
            assert not post.done()
            release(holder)
            answered = post.result(timeout=30)
        assert answered.status_code == 200, answered.text
        assert answered.json()["response"] == "Hi! I'm Chorus. What's your name?"
        stored = client.get(f"/api/dialogs/{answered.json()['dialog_id']}").json()
        assert [u["text"] for u in stored["utterances"]] == [
            "Hello",
            "Hi! I'm Chorus. What's your name?",
        ]


def test_a_lock_held_past_the_budget_is_a_503_and_nothing_half_stored(tmp_path: Path) -> None:
    path = tmp_path / "chorus.db"
    with agent_on(path) as client:
        with lock_held(path):
            refused = client.post("/", json={"user_id": "ann", "payload": "Hello"})
            assert client.get("/ping").json() == "pong"
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "5"
        assert refused.json()["error"] == "unavailable"
        again = client.post("/", json={"user_id": "ann", "payload": "Hello"})
        assert again.status_code == 200
        stored = client.get(f"/api/dialogs/{again.json()['dialog_id']}").json()
        assert [u["text"] for u in stored["utterances"]] == [
            "Hello",
            "Hi! I'm Chorus. What's your name?",
        ]
