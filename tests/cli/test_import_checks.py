"""`chorus import` refuses, before writing anything, what would touch another dialog's
records or break the API's bounds: a user who talked through the agent reads and talks on
as before, on either store."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import MongoClient
from typer.testing import CliRunner

from agent.cli.main import app
from tests.conftest import AgentFactory, service_entry
from tests.support.services import counter_skill


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def say(client: httpx.Client, user: str, text: str) -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def talking(services: Any, agent: AgentFactory) -> httpx.Client:
    return agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}}
    )


def header() -> str:
    return json.dumps({"format": "chorus-backup", "version": 1})


def forged(user_id: str, dialog_id: str, utt_ids: list[str]) -> dict[str, Any]:
    """A dialog record of ``user_id`` whose utterances (the user's and the bot's in turn)
    have these ids."""
    utterances: list[dict[str, Any]] = []
    for index, utt_id in enumerate(utt_ids):
        utterance: dict[str, Any] = {"utt_id": utt_id, "text": f"forged {index}"}
        if index % 2:
            utterance |= {"speaker": "bot", "active_skill": "counter", "confidence": 1.0}
        else:
            utterance |= {"speaker": "human"}
        utterances.append(utterance)
    return {
        "type": "dialog",
        "user_id": user_id,
        "active": False,
        "dialog": {
            "dialog_id": dialog_id,
            "date_start": "2026-01-01T00:00:00Z",
            "date_finish": "2026-01-01T00:05:00Z",
            "utterances": utterances,
        },
    }


def refused(db_url: str, path: Path, records: list[dict[str, Any]], *expected: str) -> None:
    """The file of these records is refused, naming what is expected, and nothing of it
    is stored."""
    path.write_text("\n".join([header(), *(json.dumps(r) for r in records)]) + "\n")
    result = run("import", str(path), "--db", db_url)
    message = " ".join(result.output.split())
    assert result.exit_code == 2, message
    for part in expected:
        assert part in message, message
    assert "nothing was imported" in message


def stored_dialog_ids(db_url: str) -> list[str]:
    exported = run("export", "--all", "--db", db_url)
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in exported.stdout.splitlines()[1:]]
    return [line["dialog"]["dialog_id"] for line in lines if line["type"] == "dialog"]


@pytest.mark.both_stores
def test_an_import_that_reuses_a_users_utterance_ids_is_refused_and_the_user_talks_on(
    services: Any, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    client = talking(services, agent)
    dialog_id = say(client, "victim", "hello")["dialog_id"]
    say(client, "victim", "how are you?")
    before = client.get(f"/api/dialogs/{dialog_id}").json()
    backup = tmp_path / "backup.jsonl"
    exported = run("export", "--all", "-o", str(backup), "--db", db_url)
    assert exported.exit_code == 0, (exported.output, exported.exception)
    (record,) = [json.loads(line) for line in backup.read_text().splitlines()[2:]]
    ids = [u["utt_id"] for u in record["dialog"]["utterances"]]
    assert len(ids) == 4
    # A dialog of another user before the bad one: it must not be stored either.
    innocent = forged("carol", "carols0dialog", ["carol-a", "carol-b"])
    file = tmp_path / "forged.jsonl"

    refused(
        db_url,
        file,
        [innocent, forged("mallory", "mallory0dialog", ids[:2])],
        f"utterance id {ids[0]!r} is stored in another dialog ({dialog_id})",
    )
    # The victim's next numbers (MongoDB names an utterance <dialog id>-<number>).
    refused(
        db_url,
        file,
        [innocent, forged("mallory", "mallory1dialog", [f"{dialog_id}-4", f"{dialog_id}-5"])],
        f"utterance id '{dialog_id}-4' is numbered as dialog {dialog_id}'s utterances are",
    )
    # Within the file: a second dialog reusing the first one's ids.
    refused(
        db_url,
        file,
        [innocent, forged("mallory", "mallory2dialog", ["carol-b", "m-1"])],
        "utterance id 'carol-b' is also an utterance of dialog carols0dialog (line 2)",
    )

    assert client.get(f"/api/dialogs/{dialog_id}").json() == before
    assert client.get("/api/user/carol").status_code == 404
    assert client.get("/api/user/mallory").status_code == 404
    again = say(client, "victim", "still there?")
    assert again["dialog_id"] == dialog_id
    texts = [u["text"] for u in client.get(f"/api/dialogs/{dialog_id}").json()["utterances"]]
    assert texts == [*(u["text"] for u in before["utterances"]), "still there?", "count is 3"]


@pytest.mark.parametrize("db_url", ["mongodb", "mongodb-8"], indirect=True)
def test_a_number_another_dialog_holds_is_skipped_by_the_next_turn(
    services: Any, agent: AgentFactory, db_url: str
) -> None:
    """Utterance ids of the victim's next numbers, held by another dialog (as an import
    before imports were checked left them): the victim's turns go on past them, the
    victim's dialog never shows them, and they stay the other dialog's."""
    client = talking(services, agent)
    dialog_id = say(client, "victim", "hello")["dialog_id"]
    other = say(client, "mallory", "hi")["dialog_id"]
    mongo: MongoClient[dict[str, Any]] = MongoClient(db_url)
    try:
        utterances = mongo.get_default_database()["utterances"]
        for number, seq in ((2, 0), (3, 1), (4, 0)):  # the victim's next three numbers
            planted = utterances.find_one({"_id": f"{other}-{seq}"})
            assert planted is not None
            planted.update(_id=f"{dialog_id}-{number}", seq=number, text=f"planted {number}")
            utterances.insert_one(planted)
    finally:
        mongo.close()
    for text in ("one", "two"):
        assert say(client, "victim", text)["dialog_id"] == dialog_id
    dialog = client.get(f"/api/dialogs/{dialog_id}").json()
    assert [u["text"] for u in dialog["utterances"]] == [
        "hello",
        "count is 1",
        "one",
        "count is 2",
        "two",
        "count is 3",
    ]
    # The other dialog's records are as they were (by their dialog id, they are its).
    assert [u["text"] for u in client.get(f"/api/dialogs/{other}").json()["utterances"]] == [
        "hi",
        "count is 1",
        "planted 2",
        "planted 3",
        "planted 4",
    ]


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels - 1):
        value = {"down": value}
    return value


def _user(user_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "user", "user": {"user_external_id": user_id, **fields}}


Edit = Callable[[dict[str, Any], dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    """An edit of the user record (``user.``) or of the dialog record (``dialog.``)."""

    def edit(user: dict[str, Any], dialog: dict[str, Any]) -> None:
        record, *keys = path.split(".")
        target: Any = user if record == "user" else dialog
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[keys[-1]] = value

    return edit


def _user_id(value: str) -> Edit:
    def edit(user: dict[str, Any], dialog: dict[str, Any]) -> None:
        user["user"]["user_external_id"] = dialog["user_id"] = value

    return edit


def _repeat_id(user: dict[str, Any], dialog: dict[str, Any]) -> None:
    utterances = dialog["dialog"]["utterances"]
    utterances[2]["utt_id"] = utterances[0]["utt_id"]


def _two_answers(user: dict[str, Any], dialog: dict[str, Any]) -> None:
    utterances = dialog["dialog"]["utterances"]
    utterances[2] = copy.deepcopy(utterances[1]) | {"utt_id": "answer-again"}


OUT_OF_BOUNDS: dict[str, tuple[Edit, str]] = {
    "50,000 attribute keys": (
        _set("user.user.attributes", {f"k{n}": n for n in range(50_000)}),
        "user.attributes hold 50000 keys; the limit is 1000 (MAX_ATTRIBUTE_KEYS)",
    ),
    "attributes 60 deep": (
        _set("user.user.attributes", {"deep": _deep(60)}),
        "nested more than 32 levels deep (MAX_JSON_DEPTH)",
    ),
    "an annotation 120 deep": (
        _set("dialog.dialog.utterances.0.annotations", {"deep": _deep(120)}),
        "dialog.utterances.0.annotations['deep']",
    ),
    "a line break in a user id": (_user_id("ann\nforged log line"), "is not printable text"),
    "a NUL in a user id": (_user_id("ann\x00"), "is not printable text"),
    "a 5,000 characters user id": (
        _user_id("u" * 5000),
        "user id is 5000 characters long; the limit is 256 (MAX_USER_ID_LENGTH)",
    ),
    "the key a.b": (_set("user.user.attributes", {"a.b": 1}), "attribute key 'a.b'"),
    "the key $where": (_set("dialog.dialog.bot", {"attributes": {"$where": 1}}), "'$where'"),
    "the empty key": (_set("dialog.dialog.attributes", {"": 1}), "attribute key ''"),
    "NaN": (_set("dialog.dialog.utterances.1.confidence", float("nan")), "NaN"),
    "a 17 MB answer": (
        _set("dialog.dialog.utterances.1.text", "x" * 17_000_000),
        "dialog.utterances.1: is about 17000",
    ),
    "a message over the text limit": (
        _set("dialog.dialog.utterances.0.text", "x" * 5000),
        "dialog.utterances.0.text is 5000 characters long; the limit is 4096 "
        "(CHORUS_MAX_TEXT_LENGTH)",
    ),
    "an utterance id twice": (_repeat_id, "is the id of an earlier utterance of the dialog"),
    "two answers in a row": (_two_answers, "each answer follows the user's message"),
    "a dialog id the API cannot read": (
        _set("dialog.dialog.dialog_id", "a/../b"),
        "line 4: dialog 'a/../b': dialog_id 'a/../b' is not an id the API reads",
    ),
}


#: The cases refused at the user's record (line 2); the others at the second dialog's.
ON_THE_USER = {
    "50,000 attribute keys",
    "attributes 60 deep",
    "the key a.b",
    "a line break in a user id",
    "a NUL in a user id",
    "a 5,000 characters user id",
}


@pytest.mark.parametrize("case", OUT_OF_BOUNDS, ids=list(OUT_OF_BOUNDS))
def test_a_record_over_the_apis_bounds_is_refused_before_anything_is_written(
    case: str, db_url: str, tmp_path: Path
) -> None:
    edit, expected = OUT_OF_BOUNDS[case]
    user = _user("ann")
    fine = forged("ann", "anns0dialog", ["a-0", "a-1", "a-2", "a-3"])
    bad = forged("ann", "anns1dialog", ["b-0", "b-1", "b-2", "b-3"])
    edit(user, bad)
    line = "line 2: user" if case in ON_THE_USER else "line 4: dialog"
    refused(db_url, tmp_path / "bad.jsonl", [user, fine, bad], line, expected)
    assert stored_dialog_ids(db_url) == []
    # Without the bad record, the same file imports.
    path = tmp_path / "fine.jsonl"
    path.write_text("\n".join([header(), json.dumps(_user("ann")), json.dumps(fine)]) + "\n")
    assert run("import", str(path), "--db", db_url).exit_code == 0
    assert stored_dialog_ids(db_url) == ["anns0dialog"]
