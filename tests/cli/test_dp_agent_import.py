"""`chorus import --from-dp-agent`: a database DeepPavlov Agent wrote itself (2.2.0's in
tests/data/dp_agent, and cea048e's, the commit Dream runs, in tests/data/dp_agent_cea048e;
made by tools/dp_agent_fixture.py with dp-agent's own state manager) loaded into a MongoDB
server, imported into each store, and read back through the agent's API in both of its
views."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bson import ObjectId, json_util
from pymongo import MongoClient
from typer.testing import CliRunner

from agent.cli.main import app
from skills.fallback.app import app as fallback_app
from tests.conftest import AgentFactory, fresh_database, service_entry

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

DATA = Path(__file__).resolve().parent.parent / "data"
#: Each release's database: 2.2.0 (the last on PyPI) and cea048e (2.3.0a, Dream's).
RELEASES = {"2.2.0": DATA / "dp_agent", "cea048e": DATA / "dp_agent_cea048e"}
COLLECTIONS = ("user", "bot", "dialog", "human_utterance", "bot_utterance")
#: The release the database in use was written by (set by ``dp_agent_db``).
_release = {"dump": RELEASES["2.2.0"]}


def dumped(name: str, release: str | None = None) -> list[dict[str, Any]]:
    folder = _release["dump"] if release is None else RELEASES[release]
    docs: list[dict[str, Any]] = json_util.loads((folder / f"{name}.json").read_text())
    return docs


@pytest.fixture(params=sorted(RELEASES))
def dp_agent_db(request: pytest.FixtureRequest, mongodb_url: str) -> Iterator[str]:
    """dp-agent's database, as each release left it, on the session's MongoDB server."""
    _release["dump"] = RELEASES[request.param]
    url = fresh_database(mongodb_url)
    client: MongoClient[dict[str, Any]] = MongoClient(url)
    db = client.get_default_database()
    for name in COLLECTIONS:
        db[name].insert_many(dumped(name))
    yield url
    client.drop_database(db.name)
    client.close()


def import_from(dp_agent_db: str, db_url: str) -> str:
    result = CliRunner().invoke(app, ["import", "--from-dp-agent", dp_agent_db, "--db", db_url])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_dp_agents_dialogs_come_along_once_and_read_back_in_both_views(
    dp_agent_db: str, db_url: str, services: Any, agent: AgentFactory
) -> None:
    dialogs, humans, bots = dumped("dialog"), dumped("human_utterance"), dumped("bot_utterance")
    count = len(dialogs)
    assert f"{count} dialog(s) stored, 0 already there" in import_from(dp_agent_db, db_url)
    assert f"0 dialog(s) stored, {count} already there" in import_from(dp_agent_db, db_url)
    client: httpx.Client = agent(
        {"services": {"skills": {"fallback": service_entry(services(fallback_app).url)}}}
    )
    closed, open_ann, open_bob = dialogs[:3]

    ann = client.get("/api/user/ann").json()
    assert [d["dialog_id"] for d in ann] == [closed["dialog_id"], open_ann["dialog_id"]]
    first = ann[0]
    in_order = sorted(
        (u for u in [*humans, *bots] if u["_dialog_id"] == closed["_id"]),
        key=lambda u: u["_in_dialog_id"],
    )
    assert [u["utt_id"] for u in first["utterances"]] == [u["utt_id"] for u in in_order]
    assert [u["text"] for u in first["utterances"]] == [u["text"] for u in in_order]
    hello = first["utterances"][0]
    assert hello["annotations"] == in_order[0]["annotations"]
    # Every field the skills returned; Chorus's model adds empty human_attributes and
    # bot_attributes to a hypothesis that had none (issue 24 item 3 is about that).
    for read, written in zip(hello["hypotheses"], in_order[0]["hypotheses"], strict=True):
        assert {key: read[key] for key in written} == written
    answer = first["utterances"][1]
    assert answer["active_skill"] == in_order[1]["active_skill"]
    assert answer["attributes"]["ratings"][0]["rating"] == 5
    assert first["attributes"]["ratings"][0]["rating"] == "good"
    assert first["date_finish"] is not None and ann[1]["date_finish"] is None
    assert first["human"]["profile"]["name"] == "Ann"
    assert first["human"]["attributes"] == {"greeted": True, "likes": ["music"]}

    view = client.get(f"/api/dialogs/{first['dialog_id']}", params={"view": "dp-agent"}).json()
    assert view["dialog_id"] == closed["dialog_id"] and view["_active"] == "False"
    # dp-agent's _id is kept, and an old link by it still finds the dialog (open ones too)
    for dialog in (closed, open_ann):
        old_id = str(dialog["_id"])
        by_old_id = client.get(f"/api/dialogs/{old_id}", params={"view": "dp-agent"})
        assert by_old_id.status_code == 200, by_old_id.text
        assert by_old_id.json()["_id"] == old_id
        assert by_old_id.json()["dialog_id"] == dialog["dialog_id"]
    asked = [in_order[0]["utt_id"], in_order[2]["utt_id"]]
    assert [u["utt_id"] for u in view["human_utterances"]] == asked
    assert view["human"]["profile"]["income_per_year"] is None  # dp-agent's whole profile
    assert view["human"]["user_external_id"] == "ann"

    # The open dialogs stay open: the next message continues where dp-agent left off.
    reply = client.post("/", json={"user_id": "ann", "payload": "still there?"}).json()
    assert reply["dialog_id"] == open_ann["dialog_id"]
    closed_now = client.post("/", json={"user_id": "ann", "payload": "/close"})
    assert closed_now.status_code == 200
    after = client.get(f"/api/dialogs/{open_ann['_id']}", params={"view": "dp-agent"}).json()
    assert after["_id"] == str(open_ann["_id"]) and after["_active"] == "False"
    assert after["utterances"][-1]["text"] == reply["response"]
    bob = client.get("/api/user/bob smith/1").json()
    assert [d["dialog_id"] for d in bob] == [open_bob["dialog_id"]]
    # dp-agent's utterance ids keep working for ratings.
    rated = client.post("/rating/utterance", json={"utt_id": answer["utt_id"], "rating": "like"})
    assert rated.status_code == 200, rated.text


def test_a_database_that_is_not_dp_agents_is_refused(mongodb_url: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "import",
            "--from-dp-agent",
            fresh_database(mongodb_url),
            "--db",
            f"sqlite:///{tmp_path}/x.db",
        ],
    )
    assert result.exit_code == 2
    assert "no 'dialog' collection" in " ".join(result.output.split())


def test_a_dialog_dp_agent_stored_that_cannot_be_read_is_skipped_and_named(
    dp_agent_db: str, tmp_path: Path
) -> None:
    """One utterance spoiled after dp-agent wrote it (a confidence that is no number): that
    dialog is named and skipped, the others come along."""
    client: MongoClient[dict[str, Any]] = MongoClient(dp_agent_db)
    spoiled = dumped("dialog")[2]
    client.get_default_database()["bot_utterance"].update_one(
        {"_dialog_id": spoiled["_id"]}, {"$set": {"confidence": "high"}}
    )
    client.close()
    output = import_from(dp_agent_db, f"sqlite:///{tmp_path}/chorus.db")
    assert f"skipped dp-agent dialog {spoiled['dialog_id']}: could not convert" in output
    assert f"{len(dumped('dialog')) - 1} dialog(s) stored" in output


def test_what_dreams_dp_agent_adds_comes_along(
    mongodb_url: str, db_url: str, services: Any, agent: AgentFactory
) -> None:
    """cea048e's own: a photo without a caption, the first-turn reset of the user's
    attributes, a bot utterance's ``attributes`` and ``orig_text``."""
    url = fresh_database(mongodb_url)
    source: MongoClient[dict[str, Any]] = MongoClient(url)
    for name in COLLECTIONS:
        source.get_default_database()[name].insert_many(dumped(name, "cea048e"))
    try:
        assert "4 dialog(s) stored" in import_from(url, db_url)
    finally:
        source.drop_database(source.get_default_database().name)
        source.close()
    client: httpx.Client = agent(
        {"services": {"skills": {"fallback": service_entry(services(fallback_app).url)}}}
    )
    [photo] = client.get("/api/user/tg 42", params={"view": "dp-agent"}).json()
    human, bot = photo["utterances"]
    assert human["text"] == "" and human["attributes"] == {
        "image": "http://files:3000/file?file=a.jpg"
    }
    assert bot["text"] == bot["orig_text"] == "A cat!"
    assert bot["attributes"]["image"] == "http://files:3000/file?file=cat.jpg"
    assert bot["attributes"]["ratings"][0]["rating"] == "like"
    assert photo["human"]["attributes"] == {"disliked_skills": [], "seen_photo": True}
    assert photo["channel_type"] == "telegram"


def test_a_dp_agent_dialog_that_breaks_a_backups_checks_is_skipped_and_named(
    dp_agent_db: str, db_url: str, services: Any, agent: AgentFactory
) -> None:
    """A dialog whose ``_id`` is a string and that has no date, one whose user id holds a
    line break, and one reusing another dialog's utterance ids: each is named and skipped,
    and the dialog whose ids were reused reads as dp-agent stored it."""
    dialogs, humans = dumped("dialog"), dumped("human_utterance")
    closed = dialogs[0]
    client: MongoClient[dict[str, Any]] = MongoClient(dp_agent_db)
    db = client.get_default_database()
    db["dialog"].insert_one(
        {
            "_id": "not-an-object-id",
            "dialog_id": "stringiddialog",
            "_human_id": closed["_human_id"],
            "_bot_id": closed["_bot_id"],
            "_active": False,
        }
    )
    eve = ObjectId("ffffffffffffffffffffff01")
    db["user"].insert_one({"_id": eve, "external_id": "eve\nforged line", "profile": {}})
    thief = ObjectId("ffffffffffffffffffffff02")
    for _id, human_id, dialog_id in (
        (eve, eve, "evesdialog"),
        (thief, closed["_human_id"], "thiefdialog"),
    ):
        db["dialog"].insert_one(
            {
                "_id": _id,
                "dialog_id": dialog_id,
                "_human_id": human_id,
                "_bot_id": closed["_bot_id"],
                "_active": False,
                "date_start": closed["date_start"],
            }
        )
    stolen = next(u for u in humans if u["_dialog_id"] == closed["_id"])
    db["human_utterance"].insert_one(
        stolen | {"_id": ObjectId(), "_dialog_id": thief, "text": "overwritten"}
    )
    client.close()

    output = import_from(dp_agent_db, db_url)
    assert (
        "skipped dp-agent dialog stringiddialog: it has no date_start, and its _id "
        "'not-an-object-id' is no ObjectId" in output
    )
    assert "skipped dp-agent dialog evesdialog: its user was refused:" in output
    assert "is not printable text" in output
    assert (
        f"skipped dp-agent dialog thiefdialog: utterance id {stolen['utt_id']!r} is stored "
        f"in another dialog ({closed['dialog_id']})" in output
    )
    assert f"{len(dialogs)} dialog(s) stored" in output

    api: httpx.Client = agent(
        {"services": {"skills": {"fallback": service_entry(services(fallback_app).url)}}}
    )
    read = api.get(f"/api/dialogs/{closed['dialog_id']}").json()
    assert read["utterances"][0]["text"] == stolen["text"]
    assert api.get("/api/dialogs/thiefdialog").status_code == 404
