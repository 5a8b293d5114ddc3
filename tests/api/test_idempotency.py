"""Retries with the same message id are answered once and stored once."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pytest
from pymongo import MongoClient
from pymongo.collection import Collection

from tests.conftest import AgentFactory, service_entry
from tests.support.services import counter_skill, fixed_skill, last_index_selector


@pytest.fixture
def client(services: Any, agent: AgentFactory) -> httpx.Client:
    return agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}}
    )


def utterances(client: httpx.Client, dialog_id: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = client.get(f"/api/dialogs/{dialog_id}").json()["utterances"]
    return result


def test_a_retried_message_gets_the_first_answer_and_stores_nothing(
    client: httpx.Client,
) -> None:
    send = {"user_id": "u", "payload": "count"}
    first = client.post("/", json=send, headers={"Idempotency-Key": "k-1"}).json()
    retry = client.post("/", json=send, headers={"Idempotency-Key": "k-1"}).json()
    assert retry == first and first["response"] == "count is 1"
    by_field = client.post("/", json={**send, "message_id": "k-2"}).json()
    again = client.post("/", json={**send, "message_id": "k-2"}).json()
    assert again == by_field and by_field["response"] == "count is 2"
    assert len(utterances(client, first["dialog_id"])) == 4
    fresh = client.post("/", json=send).json()  # no key: every message is new
    assert fresh["response"] == "count is 3"


def forget(db_url: str, table: str) -> None:
    """Delete every row of ``table`` (the collection of that name on MongoDB), behind the
    agent's back."""
    if db_url.startswith("sqlite:///"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
            db.execute(f"DELETE FROM {table}")
        return
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as mongo:
        mongo.get_default_database()[table].delete_many({})


def forget_replies(db_url: str) -> None:
    """Leave the store as a database that went away between storing a keyed turn and
    recording its reply leaves it: the turn stored, no reply under the key (the agent
    gave its claim up, or the claim's lease ran out)."""
    forget(db_url, "idempotency_keys")


def test_a_retry_whose_first_reply_was_not_recorded_gets_the_stored_answer(
    client: httpx.Client, db_url: str
) -> None:
    send = {"user_id": "u", "payload": "count", "message_id": "k-lost"}
    first = client.post("/", json=send).json()
    assert first["response"] == "count is 1"
    forget_replies(db_url)
    retry = client.post("/", json=send)
    assert retry.status_code == 200, retry.text
    assert retry.json()["response"] == "count is 1"
    assert retry.json()["utt_id"] == first["utt_id"]
    stored = utterances(client, first["dialog_id"])
    assert [u["text"] for u in stored] == ["count", "count is 1"]
    assert stored[0]["message_key"] == "chat:k-lost"
    # The counter ran once: the next message counts 2.
    assert client.post("/", json={"user_id": "u", "payload": "count"}).json()["response"] == (
        "count is 2"
    )


def test_a_retried_observation_ranks_its_candidates_as_the_first_answer_did(
    services: Any, agent: AgentFactory, db_url: str
) -> None:
    """The retry is answered from the stored turn: the selector's choice, not the highest
    confidence, comes first again."""
    client = agent(
        {
            "services": {
                "skills": {
                    "sure": service_entry(services(fixed_skill("sure", "sheep", 0.9)).url),
                    "unsure": service_entry(services(fixed_skill("unsure", "wolf", 0.3)).url),
                },
                "response_selectors": {"last": service_entry(services(last_index_selector()).url)},
            }
        }
    )
    send = {"user_id": "v", "text": "who?", "message_id": "obs-ranked"}
    first = client.post("/api/v1/chat", json=send).json()
    chosen = first["text"]
    assert first["text_candidates"][0] == chosen
    assert sorted(first["text_candidates"]) == ["sheep", "wolf"]
    assert client.post("/api/v1/chat", json=send).json() == first
    forget_replies(db_url)  # an unfinished attempt's retry reads the stored turn too
    assert client.post("/api/v1/chat", json=send).json() == first


def forget_utterances(db_url: str) -> None:
    """Leave the store as a dialog deleted after its keyed turn was answered leaves it: the
    key's claim still recorded, the turn it points to gone."""
    forget(db_url, "utterances")


def test_a_retry_whose_answered_turn_is_no_longer_stored_is_told_to_use_a_new_key(
    client: httpx.Client, db_url: str
) -> None:
    """A key's claim records where its answer is stored, not a copy of the reply: with the
    turn gone there is nothing to send again, and running it anew would answer twice."""
    send = {"user_id": "u", "payload": "count", "message_id": "k-gone"}
    assert client.post("/", json=send).json()["response"] == "count is 1"
    forget_utterances(db_url)
    retry = client.post("/", json=send)
    assert retry.status_code == 409, retry.text
    assert "new key" in retry.json()["message"]
    assert "Retry-After" not in retry.headers
    fresh = client.post("/", json={**send, "message_id": "k-new"}).json()
    assert fresh["response"] == "count is 2"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_reply_the_database_refuses_to_record_is_answered_once_on_retry(
    services: Any, agent: AgentFactory, db_url: str
) -> None:
    """The real failure (an SQLite trigger): the database refuses the write that records
    the reply under the key, after the turn itself was stored."""
    client = agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}}
    )
    client.post("/", json={"user_id": "u", "payload": "count"})  # the tables exist
    path = db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER refuse_replies BEFORE UPDATE OF reply ON idempotency_keys "
            "BEGIN SELECT RAISE(ABORT, 'refused for the test'); END"
        )
    send = {"user_id": "u", "payload": "count", "message_id": "k-refused"}
    failed = client.post("/", json=send)
    assert failed.status_code >= 500
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER refuse_replies")
    retry = client.post("/", json=send)
    assert retry.status_code == 200, retry.text
    assert retry.json()["response"] == "count is 2"
    stored = utterances(client, retry.json()["dialog_id"])
    assert [u["text"] for u in stored] == ["count", "count is 1", "count", "count is 2"]
    assert client.post("/", json=send).json() == retry.json()


def test_observations_are_idempotent_too(client: httpx.Client) -> None:
    send = {"user_id": "v", "text": "count", "message_id": "obs-1"}
    first = client.post("/api/v1/chat", json=send).json()
    assert client.post("/api/v1/chat", json=send).json() == first
    assert len(utterances(client, first["dialog_id"])) == 2


@pytest.mark.store_agnostic
def test_a_bad_key_is_refused_with_a_message(client: httpx.Client) -> None:
    response = client.post(
        "/", json={"user_id": "u", "payload": "x"}, headers={"Idempotency-Key": "no spaces allowed"}
    )
    assert response.status_code == 422
    assert "Idempotency-Key" in response.json()["message"]


def test_a_retry_during_the_first_turn_is_told_to_retry(services: Any, agent: AgentFactory) -> None:
    import threading
    import time

    from tests.support.services import fixed_skill

    slow = agent(
        {
            "services": {
                "skills": {
                    "slow": service_entry(services(fixed_skill("slow", "done", 0.5, delay=1.0)).url)
                }
            }
        }
    )
    send = {"user_id": "w", "payload": "hi", "message_id": "once"}
    answers: list[httpx.Response] = []
    first = threading.Thread(target=lambda: answers.append(slow.post("/", json=send)))
    first.start()
    while "chorus_turns_in_flight 1.0" not in slow.get("/metrics").text:
        assert first.is_alive()
        time.sleep(0.01)  # probe until the first turn is in flight
    retry = slow.post("/", json=send)
    assert retry.status_code == 409
    assert retry.headers["retry-after"] == "1"
    assert "retry shortly" in retry.json()["message"]
    first.join(timeout=30)
    assert answers[0].status_code == 200
    assert slow.post("/", json=send).json() == answers[0].json()


def lose_the_end_of_the_last_turn(db_url: str, user_id: str, attributes: dict[str, Any]) -> None:
    """Leave a MongoDB store as a crash between a turn's two writes leaves it: the annotated
    human utterance and the answer stored, the user's document as before the turn (its
    utterance count two lower, its attributes as they were)."""
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as mongo:
        users: Collection[dict[str, Any]] = mongo.get_default_database()["users"]
        user = users.find_one({"user_external_id": user_id})
        assert user is not None
        changes = {f"attributes.{k}": v for k, v in attributes.items()}
        users.update_one(
            {"_id": user["_id"]}, {"$set": {"dialog.count": user["dialog"]["count"] - 2, **changes}}
        )


@pytest.mark.parametrize("db_url", ["mongodb", "mongodb-8"], indirect=True)
def test_an_answer_stored_without_the_rest_of_its_turn_is_not_run_again(
    client: httpx.Client, db_url: str
) -> None:
    """The client got 503 for that turn; its retry (no key: the same text) gets the stored
    answer, the turn's attribute update is applied once, and the dialog alternates."""
    send = {"user_id": "u", "payload": "count"}
    assert client.post("/", json=send).json()["response"] == "count is 1"
    second = client.post("/", json=send).json()
    assert second["response"] == "count is 2"
    lose_the_end_of_the_last_turn(db_url, "u", {"count": 1})
    retry = client.post("/", json=send)
    assert retry.status_code == 200, retry.text
    assert (retry.json()["response"], retry.json()["utt_id"]) == ("count is 2", second["utt_id"])
    assert [u["text"] for u in utterances(client, second["dialog_id"])] == [
        "count",
        "count is 1",
        "count",
        "count is 2",
    ]
    assert client.get("/api/user/u").json()[-1]["human"]["attributes"] == {"count": 2}
    assert client.post("/", json=send).json()["response"] == "count is 3"


@pytest.mark.parametrize("db_url", ["mongodb"], indirect=True)
def test_a_new_message_after_an_answer_stored_without_its_turn_comes_after_it(
    client: httpx.Client, db_url: str
) -> None:
    send = {"user_id": "u", "payload": "count"}
    client.post("/", json=send)
    client.post("/", json=send)
    lose_the_end_of_the_last_turn(db_url, "u", {"count": 1})
    nxt = client.post("/", json={**send, "payload": "count again"}).json()
    assert nxt["response"] == "count is 3"  # the lost turn's update was applied first
    texts = [u["text"] for u in utterances(client, nxt["dialog_id"])]
    assert texts == ["count", "count is 1", "count", "count is 2", "count again", "count is 3"]


def stored_keys(db_url: str) -> dict[str, Any]:
    """The idempotency records as stored: key -> its expiry (SQLite: a timestamp)."""
    if db_url.startswith("sqlite:///"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
            rows = db.execute("SELECT key, expires_at FROM idempotency_keys").fetchall()
        return dict(rows)
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as mongo:
        found: list[dict[str, Any]] = list(mongo.get_default_database()["idempotency_keys"].find())
    return {str(doc["_id"]).rsplit(":", 1)[-1]: doc.get("expires_at") for doc in found}


def test_a_key_is_kept_only_for_its_retention_then_it_is_a_new_message(
    services: Any, agent: AgentFactory, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With KEY_RETENTION (a constant) a thousandth of a second, every request comes after the
    key it repeats expired: the key is a new message (when the keyed turn is no longer the
    last, whose stored answer a retry gets either way). SQLite deletes expired records on
    later claims; MongoDB by a TTL index, where the server has them."""
    monkeypatch.setattr("agent.api.composition.KEY_RETENTION", 0.001)
    client = agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}}
    )
    send = {"user_id": "u", "payload": "count"}
    first = client.post("/", json=send, headers={"Idempotency-Key": "k"}).json()
    assert first["response"] == "count is 1"
    assert client.post("/", json=send).json()["response"] == "count is 2"
    again = client.post("/", json=send, headers={"Idempotency-Key": "k"}).json()
    assert again["response"] == "count is 3"  # not the first answer again
    assert len(utterances(client, first["dialog_id"])) == 6
    stored = stored_keys(db_url)
    assert list(stored) == ["k" if db_url.startswith("mongodb") else "chat:k"]
    assert stored[next(iter(stored))] is not None  # it has an expiry
    assert client.post("/", json=send, headers={"Idempotency-Key": "k2"}).status_code == 200
    if db_url.startswith("sqlite:///"):
        assert list(stored_keys(db_url)) == ["chat:k2"]  # the expired record is gone
        return
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as mongo:
        indexes = mongo.get_default_database()["idempotency_keys"].index_information()
        ferretdb = "ferretdbVersion" in mongo.admin.command("buildInfo")
    assert ferretdb or indexes["keys_expire"]["expireAfterSeconds"] == 0, indexes


def test_a_key_of_other_letters_is_answered_once_too(client: httpx.Client) -> None:
    """A key the header's pattern takes but the route's plain path does not (word
    characters beyond ASCII) is answered by FastAPI's path, with the same promise."""
    send = {"user_id": "w", "payload": "count"}
    headers = {b"Idempotency-Key": "clé-1".encode("latin-1")}
    first = client.post("/", json=send, headers=headers)
    assert first.status_code == 200, first.text
    retry = client.post("/", json=send, headers=headers)
    assert retry.json() == first.json() and first.json()["response"] == "count is 1"
