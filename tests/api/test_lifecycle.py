"""The data lifecycle through the real agent: a turn in flight survives a sweep run by
another agent on the same database, and an agent with a retention setting sweeps by
itself and says so on ``/metrics``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from agent.lifecycle import Sweeper
from agent.metrics import Metrics
from agent.state.models import utc_now
from agent.store import open_store
from agent.store.base import Retention
from tests.api.test_concurrent_messages import gated_skill, pipeline
from tests.conftest import AgentFactory
from tests.support.servers import ServerThread

EVERYTHING_EXPIRED = Retention(
    closed_dialogs=timedelta(seconds=1),
    idle_dialogs=timedelta(seconds=1),
    compact_turns=timedelta(seconds=1),
)


async def sweep_a_year_later(db_url: str) -> tuple[int, int, int]:
    """A whole round of every rule, a year from now, by another agent's store."""
    store = await open_store(db_url)
    try:
        sweeper = Sweeper(
            store.lifecycle,
            EVERYTHING_EXPIRED,
            Metrics(),
            interval=60,
            batch=50,
            clock=lambda: utc_now() + timedelta(days=365),
        )
        swept = await sweeper.run_round()
    finally:
        await store.close()
    return swept.dialogs_closed, swept.dialogs_deleted, swept.utterances_compacted


async def test_a_turn_in_flight_survives_a_sweep(
    agent: AgentFactory, services: Callable[[FastAPI], ServerThread], db_url: str
) -> None:
    arrived, gate = threading.Event(), threading.Event()
    url = services(gated_skill(arrived, gate)).url
    client = agent(pipeline(url, timeout=20))
    assert client.post("/", json={"user_id": "bob", "payload": "hello"}).status_code == 200
    assert client.post("/", json={"user_id": "ann", "payload": "earlier"}).status_code == 200
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(client.post, "/", json={"user_id": "ann", "payload": "first"})
        assert arrived.wait(30), "the message never reached the skill"

        closed, deleted, compacted = await sweep_a_year_later(db_url)

        gate.set()
        reply = first.result()
    # bob's idle dialog was closed and his turn compacted; ann's, in flight, untouched
    assert (closed, deleted, compacted) == (1, 0, 2)
    assert reply.status_code == 200, reply.text
    assert reply.json()["response"] == "answer to first"
    (dialog,) = client.get("/api/user/ann").json()
    assert dialog["date_finish"] is None
    assert [u["text"] for u in dialog["utterances"]] == [
        "earlier",
        "answer to earlier",
        "first",
        "answer to first",
    ]
    assert [h["skill_name"] for h in dialog["utterances"][2]["hypotheses"]] == ["skill"]
    assert dialog["utterances"][2]["trace"] != []  # the in-flight turn kept its trace
    (bobs,) = client.get("/api/user/bob").json()
    assert bobs["date_finish"] is not None
    assert [u["text"] for u in bobs["utterances"]] == ["hello", "answer to hello"]
    assert bobs["utterances"][0]["trace"] == []  # compacted
    # bob's next message opens a new dialog
    assert client.post("/", json={"user_id": "bob", "payload": "again"}).status_code == 200
    assert len(dialog_of_all(client, "bob")) == 2


def dialog_of_all(client: httpx.Client, user: str) -> list[dict[str, object]]:
    dialogs: list[dict[str, object]] = client.get(f"/api/user/{user}").json()
    return dialogs


def lifecycle_counts(client: httpx.Client) -> dict[str, float]:
    counts = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(("chorus_lifecycle_records_total{", "chorus_store_records{")):
            name, value = line.rsplit(" ", 1)
            counts[name] = float(value)
    return counts


def test_an_agent_with_a_retention_setting_compacts_by_itself(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arrived, gate = threading.Event(), threading.Event()
    gate.set()
    url = services(gated_skill(arrived, gate)).url
    monkeypatch.setattr("agent.api.composition.SWEEP_INTERVAL", 0.02)
    client = agent(pipeline(url), retention=Retention(compact_turns=timedelta(milliseconds=1)))
    assert client.post("/", json={"user_id": "ann", "payload": "hello"}).status_code == 200
    compacted = 'chorus_lifecycle_records_total{record="utterances_compacted",rule="compact_turns"}'
    deadline = utc_now() + timedelta(seconds=20)
    size = 'chorus_store_records{collection="utterances"}'
    counts = lifecycle_counts(client)
    while counts.get(compacted) != 1 or counts.get(size) != 2:  # the sweep runs every 20 ms
        assert utc_now() < deadline, counts
        counts = lifecycle_counts(client)
    (dialog,) = client.get("/api/user/ann").json()
    assert [u["text"] for u in dialog["utterances"]] == ["hello", "answer to hello"]
    assert dialog["utterances"][0]["annotations"] == {}
    assert dialog["utterances"][0]["trace"] == []
