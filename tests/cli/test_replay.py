"""`chorus replay`: dialogs stored through the real agent and the shipped pipeline's real
services, replayed through a copy of the pipeline without one skill;
what changes is exactly what that skill had answered, and the store keeps every byte."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from bson import json_util
from fastapi import FastAPI
from pymongo import MongoClient
from pymongo.database import Database
from typer.testing import CliRunner, Result

from agent.backup.files import GROUP
from agent.cli.main import app
from agent.cli.replay import report
from agent.sdk import DialogView, Service, SkillHypothesis
from agent.state.models import BotUtterance, HumanUtterance
from agent.store import open_store
from agent.store.mongo import migrations as mongo_migrations
from agent.store.sqlite import base as sqlite_base
from tests.conftest import agents, service_entry
from tests.dream import services as dream
from tests.e2e.test_default_pipeline import shipped_pipeline
from tests.support.html_tree import parse
from tests.support.servers import ServerThread
from tests.support.services import fixed_skill
from tests.support.stored import stored_dialogs

ROOT = Path(__file__).resolve().parents[2]

#: What the users say, each user starting at another line: greetings, names, FAQ
#: questions, small talk and gibberish, so that every skill answers some turns.
SCRIPT = (
    "Hello!",
    "What is Chorus?",
    "My name is Ann",
    "How are you?",
    "zxqv plorb wug",
    "How do I add a skill?",
    "what is my name?",
    "Do you like music?",
)
DIALOGS = 100
TURNS_PER_DIALOG = 2


def store_snapshot(db_url: str) -> Any:
    """Everything the store holds, to compare before and after: on SQLite the files of
    its folder byte for byte, on MongoDB a dump of every collection and its indexes."""
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        return {
            entry.name: hashlib.sha256(entry.read_bytes()).hexdigest()
            for entry in sorted(path.parent.iterdir())
            if entry.name.startswith(path.name)
        }
    client: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as client:
        database: Database[dict[str, Any]] = client.get_default_database()
        return {
            name: (
                json_util.dumps(list(database[name].find().sort("_id"))),
                json_util.dumps(database[name].index_information()),
            )
            for name in sorted(database.list_collection_names())
        }


def run_replay(*args: str, **popen: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "CHORUS_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "agent.cli.main", "replay", *args],
        cwd=ROOT,
        env=env,
        text=True,
        **popen,
    )


def replay_here(*args: str) -> Result:
    """``chorus replay ARGS`` in the test's process, with no LLM_ or CHORUS_ setting from
    outside, as ``run_replay`` runs it: for a test of what the replay reports, which a
    process would only start slower. Ctrl-C and a replay beside a serving agent stay
    processes (``run_replay``)."""
    unset: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("LLM_", "CHORUS_"))
    }
    return CliRunner().invoke(app, ["replay", *args], env=unset)


def patient(pipeline: dict[str, Any]) -> dict[str, Any]:
    """The pipeline with timeouts a busy test machine cannot reach: a service timing out
    in one run and not in the other would be a change the candidate did not make."""
    pipeline = copy.deepcopy(pipeline)
    for entries in pipeline["services"].values():
        for entry in entries.values():
            entry["connector"]["timeout"] = 60.0
    pipeline["turn_timeout"] = 120.0
    return pipeline


@pytest.mark.timeout(600)  # 200 turns stored and replayed through ten real services
def test_removing_a_skill_changes_exactly_the_turns_it_answered(
    tmp_path: Path,
    db_url: str,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)  # the LLM skill is off, as in `make run`
    stored_pipeline = patient(shipped_pipeline(services))
    with agents(tmp_path, db_url) as start:
        client = start(stored_pipeline)

        def talk(number: int) -> None:
            for turn in range(TURNS_PER_DIALOG):
                text = SCRIPT[(number + turn) % len(SCRIPT)]
                response = client.post("/", json={"user_id": f"user-{number}", "payload": text})
                assert response.status_code == 200, response.text

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(talk, range(DIALOGS)))
    dialogs = stored_dialogs(db_url)
    assert sorted(d.human.user_external_id for d in dialogs) == sorted(
        f"user-{number}" for number in range(DIALOGS)
    )
    answered: dict[str, str] = {}  # utt_id of each human utterance → the skill that answered
    for dialog in dialogs:
        utterances = dialog.utterances
        for human, bot in zip(utterances[::2], utterances[1::2], strict=True):
            assert isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance)
            answered[human.utt_id] = bot.active_skill
    by_faq = {utt_id for utt_id, skill in answered.items() if skill == "faq"}
    assert by_faq and len(by_faq) < len(answered), "the script must reach the FAQ and more"

    candidate = copy.deepcopy(stored_pipeline)
    del candidate["services"]["skills"]["faq"]
    candidate_path = tmp_path / "candidate.json"
    candidate_path.write_text(json.dumps(candidate))
    before = store_snapshot(db_url)
    out, html = tmp_path / "diff.jsonl", tmp_path / "report.html"
    replaying = replay_here(
        "--pipeline", str(candidate_path), "--db", db_url, "--out", str(out),
        "--html", str(html), "--json",
    )  # fmt: skip
    assert replaying.exit_code == 0, replaying.stderr
    stdout = replaying.stdout

    assert store_snapshot(db_url) == before
    diffs = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(d["utt_id"] for d in diffs) == sorted(answered)
    changed = {d["utt_id"] for d in diffs if d["skill_changed"] or d["response_changed"]}
    assert changed == by_faq
    assert all(d["stored"]["skill"] == "faq" != d["candidate"]["skill"] for d in diffs
               if d["utt_id"] in by_faq)  # fmt: skip
    summary = json.loads(stdout)
    assert (summary["turns"], summary["skill_changed"]) == (len(answered), len(by_faq))
    assert summary["stored"]["skills"]["faq"] == len(by_faq)
    assert "faq" not in summary["candidate"]["skills"]
    page = html.read_text()
    faq_turn = next(d for d in diffs if d["utt_id"] in by_faq)
    assert faq_turn["stored"]["response"].replace("'", "&#x27;") in page


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    yield opened
    opened.set()  # lets the held calls end, so their server can stop


def answers_then_holds(answers: int, gate: threading.Event) -> FastAPI:
    """A skill that answers its first ``answers`` calls, then holds every later one until
    ``gate`` opens: a replay through it stops making progress at a known turn."""
    service = Service("holder")
    calls = iter(range(10**6))

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # a worker thread: it may block
        if next(calls) >= answers:
            gate.wait(300)
        return SkillHypothesis(text="held", confidence=0.5)

    return service.app


def test_ctrl_c_stops_with_the_report_of_the_turns_done(
    tmp_path: Path,
    db_url: str,
    services: Callable[[FastAPI], ServerThread],
    gate: threading.Event,
) -> None:
    stored_pipeline = {
        "services": {
            "skills": {"hello": service_entry(services(fixed_skill("hello", "hi", 0.9)).url)}
        }
    }
    with agents(tmp_path, db_url) as start:
        client = start(stored_pipeline)
        for number in range(12):
            assert client.post("/", json={"user_id": f"u{number % 3}", "payload": "hey"}).is_success
    holder = services(answers_then_holds(5, gate))
    candidate = {
        "services": {"skills": {"holder": service_entry(holder.url, timeout=300.0)}},
        "turn_timeout": 300.0,
    }
    candidate_path = tmp_path / "candidate.json"
    candidate_path.write_text(json.dumps(candidate))
    out, html = tmp_path / "diff.jsonl", tmp_path / "report.html"
    before = store_snapshot(db_url)
    replaying = run_replay(
        "--pipeline", str(candidate_path), "--db", db_url, "--concurrency", "1",
        "--out", str(out), "--html", str(html), "--json",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert replaying.stderr is not None
    seen = []
    for line in replaying.stderr:  # the progress, until the fifth turn is done
        seen.append(line)
        if line.strip() == "replayed 5/12 turns":
            break
    else:
        pytest.fail(f"the replay ended before its fifth turn: {''.join(seen)}")
    replaying.send_signal(signal.SIGINT)
    stdout, stderr = replaying.communicate(timeout=120)
    assert replaying.returncode == 130, stderr

    summary = json.loads(stdout)
    assert (summary["turns"], summary["selected"], summary["interrupted"]) == (5, 12, True)
    diffs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(diffs) == 5
    assert all(d["stored"]["response"] == "hi" and d["candidate"]["response"] == "held"
               for d in diffs)  # fmt: skip
    assert "Interrupted: 5 of 12 turns" in html.read_text()
    assert store_snapshot(db_url) == before


def stored_turn_ids(db_url: str) -> set[str]:
    """The ids of the stored human utterances that were answered: the turns a replay of
    the whole store chooses."""
    return {
        human.utt_id
        for dialog in stored_dialogs(db_url)
        for human, bot in itertools.pairwise(dialog.utterances)
        if isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance)
    }


@pytest.mark.timeout(300)
def test_a_replay_runs_the_turns_chosen_at_its_start_while_the_agent_adds_more(
    tmp_path: Path,
    db_url: str,
    services: Callable[[FastAPI], ServerThread],
    gate: threading.Event,
) -> None:
    """The replay holds at its second turn while the agent serves a new turn in the last
    dialog (read a group of dialogs later) and a new user's first: neither is replayed."""
    hello = {
        "services": {"skills": {"hi": service_entry(services(fixed_skill("hi", "hi", 1)).url)}}
    }
    holder = services(answers_then_holds(1, gate))
    candidate = tmp_path / "candidate.json"
    candidate.write_text(
        json.dumps(
            {
                "services": {"skills": {"holder": service_entry(holder.url, timeout=300.0)}},
                "turn_timeout": 300.0,
            }
        )
    )
    users = [f"u{number}" for number in range(GROUP + 1)]
    with agents(tmp_path, db_url) as start:
        client = start(hello)
        for user in users:
            assert client.post("/", json={"user_id": user, "payload": "hey"}).is_success
        at_start = stored_turn_ids(db_url)
        out = tmp_path / "diff.jsonl"
        replaying = run_replay(
            "--pipeline", str(candidate), "--db", db_url, "--concurrency", "1",
            "--out", str(out), "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert replaying.stderr is not None
        seen = []
        for line in replaying.stderr:  # the first turn is done: the turns were chosen
            seen.append(line)
            if line.strip() == f"replayed 1/{len(users)} turns":
                break
        else:
            pytest.fail(f"the replay ended before its first turn: {''.join(seen)}")
        for user in (users[-1], "late"):
            assert client.post("/", json={"user_id": user, "payload": "more"}).is_success
        assert len(stored_turn_ids(db_url)) == len(users) + 2
        gate.set()
        stdout, stderr = replaying.communicate(timeout=240)
    assert replaying.returncode == 0, "".join(seen) + stderr

    summary = json.loads(stdout)
    assert (summary["turns"], summary["selected"]) == (len(users), len(users))
    diffs = [json.loads(line) for line in out.read_text().splitlines()]
    assert {d["utt_id"] for d in diffs} == at_start
    assert len(diffs) == len(at_start)


def dp_agent_pipeline(services: Callable[[FastAPI], ServerThread]) -> dict[str, Any]:
    """A dp-agent pipeline_conf.json: a skill selector, an ELIZA-like skill and a dff-like
    one keeping its state in the human attributes, and a confidence response selector that
    hands the chosen skill's attributes on."""
    formatters = "tests.dream.formatters"

    def entry(app: FastAPI, previous: str, method: str, formatter: Any) -> dict[str, Any]:
        return {
            "connector": {"protocol": "http", "url": f"{services(app).url}/respond"},
            "dialog_formatter": formatter,
            "response_formatter": f"{formatters}:simple",
            "previous_services": [previous] if previous else [],
            **({"state_manager_method": method} if method else {"tags": ["selector"]}),
        }

    counter = entry(
        dream.counter(), "skill_selectors", "add_hypothesis", {"name": f"{formatters}:dff_like"}
    )
    counter["response_formatter"] = f"{formatters}:skill_with_attributes"
    eliza = entry(dream.eliza(), "skill_selectors", "add_hypothesis", f"{formatters}:eliza_like")
    eliza["response_formatter"] = f"{formatters}:skill_pair"
    return {
        "services": {
            "skill_selectors": {
                "rules": entry(
                    dream.skill_selector("eliza", "counter"), "", "", f"{formatters}:full_dialog"
                )
            },
            "skills": {"eliza": eliza, "counter": counter},
            "response_selectors": {
                "response_selector": entry(
                    dream.response_selector(extra=2),
                    "skills",
                    "add_bot_utterance",
                    f"{formatters}:full_dialog",
                )
            },
        }
    }


def test_a_dp_agent_pipeline_replays_as_it_ran_and_shows_a_removed_skill(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    pipeline = dp_agent_pipeline(services)
    with agents(tmp_path, db_url) as start:
        client = start(pipeline)
        for number in range(9):
            assert client.post("/", json={"user_id": f"u{number % 3}", "payload": "hi"}).is_success
    same, without_counter = tmp_path / "same.json", tmp_path / "without.json"
    same.write_text(json.dumps(pipeline))
    pruned = copy.deepcopy(pipeline)
    del pruned["services"]["skills"]["counter"]
    without_counter.write_text(json.dumps(pruned))
    before = store_snapshot(db_url)

    summaries = []
    for candidate in (same, without_counter):
        replaying = replay_here("--pipeline", str(candidate), "--db", db_url, "--json")
        assert replaying.exit_code == 0, replaying.stderr
        summaries.append(json.loads(replaying.stdout))
    # The counter's answer counts the turns in the user's attributes: the same answers
    # again only if each turn starts from the attributes as they were then.
    unchanged, changed = summaries
    assert (unchanged["turns"], unchanged["response_changed"]) == (9, 0)
    assert unchanged["stored"]["skills"] == {"counter": 9}
    assert (changed["turns"], changed["skill_changed"]) == (9, 9)
    assert changed["candidate"]["skills"] == {"eliza": 9}
    assert store_snapshot(db_url) == before


@pytest.fixture
def two_users(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> tuple[Path, list[dict[str, Any]]]:
    """A store with ann's three turns and bob's two, and a candidate pipeline file; the
    stored human utterances, oldest first."""
    hello = {
        "services": {"skills": {"hi": service_entry(services(fixed_skill("hi", "hi", 1)).url)}}
    }
    with agents(tmp_path, db_url) as start:
        client = start(hello)
        for user in ("ann", "ann", "bob", "ann", "bob"):
            assert client.post("/", json={"user_id": user, "payload": f"hey {user}"}).is_success
        humans = [
            {**utterance, "dialog_id": dialog["dialog_id"]}
            for user in ("ann", "bob")
            for dialog in client.get(f"/api/user/{user}").json()
            for utterance in dialog["utterances"]
            if utterance["speaker"] == "human"
        ]
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps(hello))
    return candidate, sorted(humans, key=sent_at)


def replayed(db_url: str, candidate: Path, *args: str) -> list[str]:
    """The utt_ids of the turns a replay chose, oldest first."""
    out = candidate.parent / "chosen.jsonl"
    result = CliRunner().invoke(
        app, ["replay", "--pipeline", str(candidate), "--db", db_url, "--out", str(out), *args]
    )
    assert result.exit_code == 0, result.output
    diffs = [json.loads(line) for line in out.read_text().splitlines()]
    return [d["utt_id"] for d in sorted(diffs, key=sent_at)]


def sent_at(utterance: dict[str, Any]) -> datetime:
    """When a JSON utterance was sent. Its date as a string does not sort: a date on a whole
    second is written without a fraction ("...:05Z", after "...:05.300000Z")."""
    return datetime.fromisoformat(utterance["date_time"])


def test_the_options_choose_the_turns(
    db_url: str, two_users: tuple[Path, list[dict[str, Any]]]
) -> None:
    candidate, humans = two_users
    ids = [u["utt_id"] for u in humans]
    anns = [u["utt_id"] for u in humans if u["text"] == "hey ann"]
    bobs = [u for u in humans if u["text"] == "hey bob"]
    assert replayed(db_url, candidate) == ids
    assert replayed(db_url, candidate, "--user", "ann") == anns
    assert replayed(db_url, candidate, "--dialog", bobs[0]["dialog_id"]) == [
        u["utt_id"] for u in bobs
    ]
    third = humans[2]["date_time"]
    assert replayed(db_url, candidate, "--since", third) == ids[2:]
    assert replayed(db_url, candidate, "--until", third) == ids[:2]
    assert replayed(db_url, candidate, "--user", "ann", "--limit", "2") == anns[:2]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--user", "nobody"], "--user 'nobody': no such user in the store"),
        (["--dialog", "nothing"], "--dialog 'nothing': no such dialog in the store"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--since must be before --until"),
        (["--db", "mysql://localhost/x"], "--db: unsupported database URL"),
    ],
)
def test_bad_options_are_refused_saying_what_to_fix(
    db_url: str, two_users: tuple[Path, list[dict[str, Any]]], args: list[str], says: str
) -> None:
    candidate, _ = two_users
    before = store_snapshot(db_url)
    result = CliRunner().invoke(
        app, ["replay", "--pipeline", str(candidate), "--db", db_url, *args]
    )
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
    assert store_snapshot(db_url) == before


def test_a_replay_reads_the_turns_of_an_agent_still_serving(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    """On SQLite the newest turns may still be in the agent's write-ahead log only."""
    hello = {
        "services": {"skills": {"hi": service_entry(services(fixed_skill("hi", "hi", 1)).url)}}
    }
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps(hello))
    with agents(tmp_path, db_url) as start:
        client = start(hello)
        for number in range(3):
            assert client.post("/", json={"user_id": "ann", "payload": f"{number}"}).is_success
        result = CliRunner().invoke(
            app, ["replay", "--pipeline", str(candidate), "--db", db_url, "--json"]
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["turns"] == 3
        # and the agent goes on serving
        assert client.post("/", json={"user_id": "ann", "payload": "3"}).is_success


@pytest.mark.both_stores
def test_a_store_that_needs_an_upgrade_is_refused_not_upgraded(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upgrading it would write: the replay says what to do instead. The store is at this
    build's version, and this build (a synthetic upgrade registered) knows one more."""
    asyncio.run(_opened_and_closed(db_url))
    latest = sqlite_base.latest_version()
    monkeypatch.setattr(sqlite_base, "UPGRADES", (*sqlite_base.UPGRADES, lambda db: None))
    monkeypatch.setattr(mongo_migrations, "UPGRADES", (*mongo_migrations.UPGRADES, _nothing))
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps({"services": {}}))
    before = store_snapshot(db_url)
    result = CliRunner().invoke(app, ["replay", "--pipeline", str(candidate), "--db", db_url])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert f"schema version {latest}, this build reads {latest + 1}" in said
    assert "run `chorus stats` on it once to bring it up to date" in said
    assert store_snapshot(db_url) == before


async def _opened_and_closed(db_url: str) -> None:
    await (await open_store(db_url)).close()


async def _nothing(db: object) -> None:
    """An upgrade step with nothing to do."""


def keyword_skill(name: str, word: str, confidence: float) -> FastAPI:
    """A skill sure of itself (``confidence``) only when the message has ``word``."""
    service = Service(name)

    @service.skill
    async def answer(dialog: DialogView) -> SkillHypothesis:
        sure = word in dialog.utterances[-1].text.lower()
        return SkillHypothesis(text=f"{name} here", confidence=confidence if sure else 0.01)

    return service.app


#: What each user says: three ask the same question (spelt three ways), three others ask
#: two more, and the last one's turn does not change.
ASKED = ("What is Chorus?", "what is  chorus?", "WHAT IS CHORUS?", "How are you?",
         "how are you?", "Why?", "hello")  # fmt: skip


def test_the_report_shows_what_decides_a_candidate_on_one_page(
    tmp_path: Path,
    db_url: str,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The FAQ skill (questions) is removed and a "what" skill added: the report tells
    where the answers went, their confidence, their ratings, each service's latency and
    the config's change, groups the turns by what was said, links them to the inspector,
    and shows only the largest groups and their first turns (here 2 and 2)."""
    chat = service_entry(services(fixed_skill("chat", "let's chat", 0.5)).url)
    stored = {
        "services": {
            "skills": {
                "faq": service_entry(services(keyword_skill("faq", "?", 0.9)).url),
                "chat": chat,
            }
        }
    }
    whatbot = service_entry(services(keyword_skill("whatbot", "what", 0.7)).url)
    candidate = {"services": {"skills": {"chat": chat, "whatbot": whatbot}}}
    baseline_path, candidate_path = tmp_path / "stored.json", tmp_path / "candidate.json"
    baseline_path.write_text(json.dumps(stored))
    candidate_path.write_text(json.dumps(candidate))
    with agents(tmp_path, db_url) as start:
        client = start(stored)
        replies = {}
        for number, text in enumerate(ASKED):
            response = client.post("/", json={"user_id": f"u{number}", "payload": text})
            assert response.is_success, response.text
            replies[f"u{number}"] = response.json()
        for user, rating in (("u0", 5), ("u3", 2)):
            body = {"user_id": user, "utt_id": replies[user]["utt_id"], "rating": rating}
            assert client.post("/rating/utterance", json=body).is_success
        body = {"user_id": "u0", "dialog_id": replies["u0"]["dialog_id"], "rating": 4}
        assert client.post("/rating/dialog", json=body).is_success

    monkeypatch.setattr(report, "MAX_GROUPS", 2)
    monkeypatch.setattr(report, "MAX_GROUP_ROWS", 2)
    html = tmp_path / "report.html"
    result = CliRunner().invoke(app, [
        "replay", "--pipeline", str(candidate_path), "--db", db_url, "--html", str(html),
        "--baseline", str(baseline_path), "--agent-url", "http://agent.example:9/",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    page = parse(html.read_text())

    assert page.by_id("transitions").rows() == [
        ["stored skill", "candidate's skill", "turns"],
        ["faq", "chat", "3"],
        ["faq", "whatbot", "3"],
    ]
    assert page.by_id("confidence").rows()[1:] == [
        ["faq → chat", "3", "0.90", "0.50", "0", "3"],
        ["faq → whatbot", "3", "0.90", "0.70", "0", "3"],
    ]
    ratings = page.by_id("ratings")
    assert "2 of 6 changed turns have a rated stored answer, 3.50 on average" in ratings.text
    assert "1 are in a rated dialog (4.00 on average)" in ratings.text
    assert ratings.rows()[1:] == [["faq → chat", "1", "2.00"], ["faq → whatbot", "1", "5.00"]]
    latency = {row[0]: row[1:] for row in page.by_id("latency").rows()[1:]}
    assert sorted(latency) == ["chat", "faq", "whatbot"]
    assert (latency["faq"][0], latency["faq"][3]) == ("7", "0")
    assert (latency["whatbot"][0], latency["whatbot"][3]) == ("0", "7")
    assert all(cell.endswith(" ms") for cell in latency["chat"][1:3] + latency["chat"][4:])
    config = {row[0]: row[1:] for row in page.by_id("config").rows()[1:]}
    assert sorted(config) == ["services.skills.faq", "services.skills.whatbot"]
    assert config["services.skills.faq"][1] == config["services.skills.whatbot"][0] == "(absent)"
    assert json.loads(config["services.skills.whatbot"][1]) == whatbot

    changed = page.by_id("changed")
    groups = list(changed.iter("details"))
    assert [group.attrs.get("open") for group in groups] == [None, None]  # collapsed
    heads = [next(group.iter("summary")).text for group in groups]
    assert heads == [
        "“What is Chorus?”: 3 turns (faq → whatbot 3)",
        "“How are you?”: 2 turns (faq → chat 2)",
    ]
    first_rows = groups[0].rows()[1:]
    assert len(first_rows) == 2
    assert "and 1 more turns" in groups[0].text
    assert "and 1 more groups (1 turns)" in changed.text
    cells = [a for a in page.iter("a") if a.attrs.get("class") in ("same", "skill", "response")]
    assert len(cells) == len(ASKED)
    assert {a.attrs.get("href") for a in cells} == {None, "#g0", "#g1"}  # "Why?" not shown
    links = [a.attrs["href"] for group in groups for a in group.iter("a")]
    dialogs = {reply["dialog_id"] for reply in replies.values()}
    assert len(links) == 4
    assert all(link.removeprefix("http://agent.example:9/inspect/") in dialogs for link in links)


def rolling_skill() -> FastAPI:
    """A skill sure of itself when asked to roll, answering another number each time:
    a nondeterministic skill, whose turns change when replayed through the same pipeline."""
    service = Service("dice")
    rolls = itertools.count()

    @service.skill
    async def answer(dialog: DialogView) -> SkillHypothesis:
        sure = "roll" in dialog.utterances[-1].text.lower()
        return SkillHypothesis(text=f"you rolled {next(rolls)}", confidence=0.9 if sure else 0.01)

    return service.app


def test_candidates_side_by_side_with_the_noise_of_the_pipeline_replayed_against_itself(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    """The dice skill answers otherwise each time: the noise run changes its two turns.
    Removing it changes them too, but no more than noise does; a FAQ skill added changes
    the two questions, which the noise run answered as stored."""
    chat = service_entry(services(fixed_skill("chat", "let's chat", 0.5)).url)
    dice = service_entry(services(rolling_skill()).url)
    faq = service_entry(services(keyword_skill("faq", "?", 0.95)).url)
    stored = {"services": {"skills": {"dice": dice, "chat": chat}}}
    files = {
        "stored.json": stored,
        "no-dice.json": {"services": {"skills": {"chat": chat}}},
        "with-faq.json": {"services": {"skills": {"dice": dice, "chat": chat, "faq": faq}}},
    }
    for name, document in files.items():
        (tmp_path / name).write_text(json.dumps(document))
    with agents(tmp_path, db_url) as start:
        client = start(stored)
        for number, text in enumerate(("roll", "roll again", "What?", "Why?", "hi")):
            assert client.post("/", json={"user_id": f"u{number}", "payload": text}).is_success
    out, html = tmp_path / "diff.jsonl", tmp_path / "report.html"
    replaying = replay_here(
        "--db", db_url, "--baseline", str(tmp_path / "stored.json"), "--noise",
        "--candidate", str(tmp_path / "no-dice.json"),
        "--candidate", str(tmp_path / "with-faq.json"),
        "--out", str(out), "--html", str(html), "--json", "--concurrency", "1",
    )  # fmt: skip
    assert replaying.exit_code == 0, replaying.stderr
    stdout = replaying.stdout

    runs = json.loads(stdout)["runs"]
    figures = [
        (r["pipeline"], r["noise"], r["turns"], r["skill_changed"], r["response_changed"],
         r["changed_beyond_noise"])
        for r in runs
    ]  # fmt: skip
    assert figures == [
        ("stored.json", True, 5, 0, 2, None),
        ("no-dice.json", False, 5, 2, 2, 0),
        ("with-faq.json", False, 5, 2, 4, 2),
    ]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert Counter(line["pipeline"] for line in lines) == {name: 5 for name in files}
    page = parse(html.read_text())
    table = page.by_id("side-by-side").rows()
    assert table[0] == ["", "noise: stored.json", "no-dice.json", "with-faq.json"]
    assert ["changed beyond noise", "", "0", "2"] in table
    assert [run.attrs["id"] for run in page.iter("details") if "run" in run.attrs["class"]] == [
        "run0", "run1", "run2"
    ]  # fmt: skip
    assert page.by_id("run2-transitions").rows()[1:] == [
        ["chat", "faq", "2"],
        ["dice", "dice", "2"],
    ]
