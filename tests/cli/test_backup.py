"""`chorus export` and `chorus import`: a store filled through the agent, backed up, put
back into the other kind of store and read back through the API as it was."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agent.api.app import create_app
from agent.cli.main import app
from agent.settings import Settings
from tests.conftest import AgentFactory, fresh_mongodb_database, service_entry
from tests.support.servers import serving
from tests.support.services import (
    counter_skill,
    counting_failure,
    length_annotator,
    where_is_parlai_agent,
)

USERS = ("ann", "bob smith/2")


def pipeline(services: Any) -> dict[str, Any]:
    """An annotator, a ParlAI skill (its candidates are hypotheses), a skill that sets
    attributes and a skill that always fails (an error on every turn)."""
    failing, _ = counting_failure()
    where_is = services(where_is_parlai_agent())
    return {
        "services": {
            "annotators": {"length": service_entry(services(length_annotator()).url)},
            "skills": {
                "counter": service_entry(services(counter_skill(confidence=0.2)).url),
                "where_is": {"connector": {"url": f"{where_is.url}/act", "protocol": "parlai"}},
                "broken": service_entry(services(failing).url),
            },
        }
    }


def say(client: httpx.Client, user: str, text: str, **extra: Any) -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def fill(client: httpx.Client) -> list[str]:
    """Two users, a closed and an open dialog each, ratings in both forms, a keyed message."""
    dialog_ids = []
    for user in USERS:
        first = say(client, user, "Mary moved to the bathroom. Where is Mary?", message_id="m-1")
        say(client, user, "count please")
        assert client.post(
            "/rating/utterance", json={"user_id": user, "utt_id": first["utt_id"], "rating": 4}
        ).is_success
        assert client.post(
            "/rating/dialog", json={"dialog_id": first["dialog_id"], "rating": "good"}
        ).is_success
        say(client, user, "/close")
        second = say(client, user, "John went to the hallway. Where is John?")
        dialog_ids += [first["dialog_id"], second["dialog_id"]]
    return dialog_ids


def read_back(client: httpx.Client, dialog_ids: list[str]) -> dict[str, Any]:
    """Everything the API serves about the dialogs and their users, both views."""
    seen: dict[str, Any] = {}
    for dialog_id in dialog_ids:
        seen[dialog_id] = client.get(f"/api/dialogs/{dialog_id}").json()
    for user in USERS:
        seen[user] = client.get(f"/api/user/{user}").json()
    for key in [*dialog_ids, *USERS]:  # the user's internal id is each store's own
        for dialog in seen[key] if isinstance(seen[key], list) else [seen[key]]:
            dialog["human"].pop("id")
    return seen


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def agent_on(tmp_path: Path) -> Iterator[Callable[[str, dict[str, Any]], httpx.Client]]:
    """``agent_on(db_url, pipeline)``: a second agent, on another store."""
    with ExitStack() as stack:

        def start(db_url: str, pipeline: dict[str, Any]) -> httpx.Client:
            path = tmp_path / "other-pipeline.json"
            path.write_text(json.dumps(pipeline))
            server = stack.enter_context(
                serving(create_app(Settings(db_url=db_url, pipeline=path)))
            )
            return stack.enter_context(httpx.Client(base_url=server.url, timeout=30))

        yield start


AgentOn = Callable[[str, dict[str, Any]], httpx.Client]


@pytest.fixture
def other_db(request: pytest.FixtureRequest, db_url: str, tmp_path: Path) -> str:
    """The other kind of store than the agent's."""
    if db_url.startswith("sqlite"):
        return fresh_mongodb_database(request, "mongodb")
    return f"sqlite:///{tmp_path}/restored.db"


@pytest.mark.both_stores
def test_a_backup_round_trips_into_the_other_kind_of_store_and_imports_once(
    services: Any,
    agent: AgentFactory,
    agent_on: AgentOn,
    db_url: str,
    other_db: str,
    tmp_path: Path,
) -> None:
    source = agent(pipeline(services))
    dialog_ids = fill(source)
    before = read_back(source, dialog_ids)
    stored = before[dialog_ids[0]]["utterances"]
    assert stored[0]["errors"] and stored[0]["trace"] and stored[0]["message_key"]
    assert {h["skill_name"] for h in stored[0]["hypotheses"]} == {"counter", "where_is"}
    assert stored[1]["attributes"]["ratings"] and stored[1]["rating"] == 4

    backup = tmp_path / "backup.jsonl"
    exported = run("export", "--all", "--output", str(backup), "--db", db_url)
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in backup.read_text().splitlines()]
    assert lines[0]["format"] == "chorus-backup" and lines[0]["version"] == 1
    assert [line["type"] for line in lines[1:]].count("dialog") == 4

    for _ in range(2):  # twice: stored once
        imported = run("import", str(backup), "--db", other_db)
        assert imported.exit_code == 0, imported.output
    assert "0 dialog(s) stored, 4 already there" in imported.output

    restored = agent_on(other_db, pipeline(services))
    assert read_back(restored, dialog_ids) == before
    assert client_ids(restored) == dialog_ids
    # The open dialogs stay open: the next message continues them.
    assert say(restored, "ann", "and now?")["dialog_id"] == dialog_ids[1]
    dp_view = restored.get(f"/api/dialogs/{dialog_ids[0]}", params={"view": "dp-agent"})
    assert dp_view.status_code == 200 and dp_view.json()["_active"] == "False"


def client_ids(client: httpx.Client) -> list[str]:
    ids: list[str] = client.get("/api/dialogs/", params={"limit": 100}).json()["dialog_ids"]
    return ids


@pytest.mark.both_stores
def test_an_export_selects_users_dialogs_and_dates_and_an_import_keeps_other_users(
    services: Any,
    agent: AgentFactory,
    agent_on: AgentOn,
    db_url: str,
    other_db: str,
    tmp_path: Path,
) -> None:
    source = agent(pipeline(services))
    dialog_ids = fill(source)
    backup = tmp_path / "ann.jsonl"
    assert run("export", "--user", "ann", "-o", str(backup), "--db", db_url).exit_code == 0
    records = [json.loads(line) for line in backup.read_text().splitlines()[1:]]
    assert [r["dialog"]["dialog_id"] for r in records if r["type"] == "dialog"] == dialog_ids[:2]
    assert [r["user"]["user_external_id"] for r in records if r["type"] == "user"] == ["ann"]

    only = run("export", "--dialog", dialog_ids[3], "--db", db_url)  # to standard output
    assert only.exit_code == 0, only.output
    assert dialog_ids[3] in only.stdout and dialog_ids[2] not in only.stdout
    later = run("export", "--all", "--since", "2999-01-01", "--db", db_url)
    assert later.exit_code == 0 and later.stdout.count("\n") == 1  # the header only

    target = agent_on(other_db, pipeline(services))
    say(target, "carol", "hello")
    assert run("import", str(backup), "--db", other_db).exit_code == 0
    assert len(target.get("/api/user/carol").json()) == 1
    assert [d["dialog_id"] for d in target.get("/api/user/ann").json()] == dialog_ids[:2]
    assert target.get("/api/user/bob smith/2").status_code == 404


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_broken_backup_is_refused_with_its_line_and_nothing_is_imported(
    services: Any, agent: AgentFactory, agent_on: AgentOn, db_url: str, tmp_path: Path
) -> None:
    source = agent(pipeline(services))
    dialog_ids = fill(source)
    backup = tmp_path / "backup.jsonl"
    assert run("export", "--all", "-o", str(backup), "--db", db_url).exit_code == 0
    lines = backup.read_text().splitlines()
    empty = f"sqlite:///{tmp_path}/empty.db"

    def refused(text: str, *expected: str) -> None:
        broken = tmp_path / "broken.jsonl"
        broken.write_text(text)
        result = run("import", str(broken), "--db", empty)
        assert result.exit_code == 2, result.output
        message = " ".join(result.output.split())
        for part in expected:
            assert part in message, message
        assert "nothing was imported" in message

    record = json.loads(lines[-1])
    record["dialog"]["utterances"][0]["speaker"] = "robot"
    refused(
        "\n".join([*lines[:-1], json.dumps(record)]),
        f"line {len(lines)}: dialog record",
        "dialog.utterances.0",
    )
    refused("\n".join([*lines[:3], lines[3][:40], *lines[4:]]), "line 4: not JSON")
    refused("\n".join(lines[1:]), "line 1: not a Chorus backup")
    refused("\n".join([lines[0], '{"type": "song"}']), "line 2: a record must be")
    header = json.loads(lines[0]) | {"version": 99}
    refused("\n".join([json.dumps(header), *lines[1:]]), "format version 99", "newer Chorus")
    refused("", "the file is empty")

    restored = agent_on(empty, pipeline(services))
    assert restored.get(f"/api/dialogs/{dialog_ids[0]}").status_code == 404


def test_export_and_import_say_what_to_fix(db_url: str, tmp_path: Path) -> None:
    nothing = run("export", "--db", db_url)
    assert nothing.exit_code == 2 and "choose --all" in nothing.output
    both = run("export", "--all", "--user", "ann", "--db", db_url)
    assert both.exit_code == 2
    unknown = run("export", "--user", "nobody", "--db", db_url)
    assert unknown.exit_code == 1 and "no such user" in unknown.output
    dates = run("export", "--all", "--since", "2026-02-01", "--until", "2026-01-01", "--db", db_url)
    assert dates.exit_code == 2 and "--since must be before --until" in dates.output
    for command in ("export", "import"):
        assert "--db" in run(command, "--help").output
    neither = run("import", "--db", db_url)
    assert neither.exit_code == 2 and "name a backup FILE" in neither.output
