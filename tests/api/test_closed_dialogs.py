"""Closing a dialog changes its end and nothing else: every field read before the close
reads the same after it, whichever way it was closed (``/close``, ``/start`` opening the
next one, the idle sweep), for a dialog opened by a turn and one restored open from a
backup, on both stores.

On MongoDB an open dialog lives in two documents (the user's holds what turns change, the
dialog's own holds its ratings), and a close that wrote the user's copy over the dialog's
lost the ratings given while it was open."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pymongo import MongoClient

from agent.backup.files import DialogData, DialogRecord, Header
from agent.state.models import Bot, BotUtterance, HumanUtterance, utc_now
from agent.store.base import Retention
from tests.api.test_arms import experiment_file
from tests.cli.test_backup import run
from tests.conftest import AgentFactory, service_entry
from tests.support.servers import ServerThread
from tests.support.services import counter_skill

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

Services = Callable[[FastAPI], ServerThread]

#: How long the idle sweep may take to close both dialogs on a busy machine.
SWEEP_DEADLINE = timedelta(seconds=60)


def say(client: httpx.Client, user: str, text: str) -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def rate(client: httpx.Client, user: str, dialog_id: str, rating: Any) -> None:
    body = {"user_id": user, "dialog_id": dialog_id, "rating": rating}
    response = client.post("/rating/dialog", json=body)
    assert response.status_code == 200, response.text


def restored_open_dialog(tmp_path: Path, db_url: str, user: str) -> str:
    """A backup's open dialog of ``user``, with every field a dialog can carry set (a rating,
    attributes with ratings of their own, a dp-agent id, an arm, the bot's attributes),
    imported with ``chorus import``; its id."""
    dialog = DialogData(
        dialog_id="b" * 32,
        date_start=utc_now() - timedelta(minutes=5),
        rating=3,
        bot=Bot(attributes={"mood": "calm"}),
        utterances=[
            HumanUtterance(text="hi there"),
            BotUtterance(text="hello", active_skill="counter", confidence=0.9),
        ],
        attributes={"topic": "boats", "ratings": [{"rating": "fine"}]},
        dp_agent_id="a" * 24,
        arm="b",
    )
    backup = tmp_path / "backup.jsonl"
    record = DialogRecord(user_id=user, active=True, dialog=dialog)
    backup.write_text(f"{Header().model_dump_json()}\n{record.model_dump_json()}\n")
    imported = run("import", str(backup), "--db", db_url)
    assert imported.exit_code == 0, imported.output
    return dialog.dialog_id


def read(client: httpx.Client, dialog_id: str) -> dict[str, Any]:
    response = client.get(f"/api/dialogs/{dialog_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("way", ["/close", "/start", "the idle sweep"])
def test_every_field_of_a_dialog_survives_its_close(
    way: str,
    services: Services,
    agent: AgentFactory,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for arm in "ab":  # a skill that sets the bot's attributes, on either arm
        url = services(counter_skill()).url
        pipeline = {"services": {"skills": {"counter": service_entry(url)}}}
        (tmp_path / f"{arm}.json").write_text(json.dumps(pipeline))
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    bea_dialog = restored_open_dialog(tmp_path, db_url, "bea")
    client = agent({}, experiment=experiment)

    ann_dialog = say(client, "ann", "hello")["dialog_id"]
    say(client, "ann", "and again")  # the bot's attributes change while it is open
    rate(client, "ann", ann_dialog, "good")  # dp-agent's form: attributes.ratings
    rate(client, "ann", ann_dialog, 4)  # and Chorus's numeric rating
    rate(client, "bea", bea_dialog, "great")  # the restored one keeps its numeric 3
    dialogs = {"ann": ann_dialog, "bea": bea_dialog}
    before = {user: read(client, dialog_id) for user, dialog_id in dialogs.items()}
    assert before["ann"]["rating"] == 4 and before["bea"]["rating"] == 3
    assert before["ann"]["bot"]["attributes"] == {"last_count": 2}
    assert before["ann"]["arm"] in ("a", "b")
    assert [r["rating"] for r in before["ann"]["attributes"]["ratings"]] == ["good", 4]
    assert [r["rating"] for r in before["bea"]["attributes"]["ratings"]] == ["fine", "great"]

    if way == "the idle sweep":
        monkeypatch.setattr("agent.api.composition.SWEEP_INTERVAL", 0.05)
        sweeper = agent(
            {}, experiment=experiment, retention=Retention(idle_dialogs=timedelta(seconds=1))
        )
        deadline = utc_now() + SWEEP_DEADLINE
        while any(read(sweeper, d)["date_finish"] is None for d in dialogs.values()):
            assert utc_now() < deadline, "the sweep closed no dialog"
    else:
        for user in dialogs:
            say(client, user, way)

    for user, dialog_id in dialogs.items():
        after = read(client, dialog_id)
        assert before[user]["date_finish"] is None and after["date_finish"] is not None
        del before[user]["date_finish"], after["date_finish"]
        assert after == before[user], f"{user}'s dialog changed when {way} closed it"


@pytest.mark.parametrize("db_url", ["mongodb"], indirect=True)
def test_a_dialog_whose_opening_was_cut_short_is_closed_whole(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    """MongoDB only (SQLite opens a dialog in one transaction): a dialog whose opening wrote
    the user's document but not its own is still the user's open dialog, and closing it
    writes its own document, with everything the opening would have written."""
    for arm in "ab":
        url = services(counter_skill()).url
        pipeline = {"services": {"skills": {"counter": service_entry(url)}}}
        (tmp_path / f"{arm}.json").write_text(json.dumps(pipeline))
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1}))
    reply = say(client, "ann", "hello")
    opened = read(client, reply["dialog_id"])
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as mongo:  # as an agent that died after the user's document
        mongo.get_default_database()["dialogs"].delete_one({"_id": reply["dialog_id"]})

    say(client, "ann", "/close")
    closed = read(client, reply["dialog_id"])
    assert closed["date_finish"] is not None
    del opened["date_finish"], closed["date_finish"]
    assert closed == opened
