"""`chorus replay --labels`: labelled turns turn a diff into a verdict; a
candidate fixes some labelled turns and breaks others, and each run counts which."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from typer.testing import CliRunner

from agent.cli.main import app
from agent.state.models import HumanUtterance
from tests.cli.test_replay import keyword_skill, store_snapshot
from tests.conftest import agents, service_entry
from tests.support.html_tree import parse
from tests.support.servers import ServerThread
from tests.support.services import fixed_skill, window_reporter
from tests.support.stored import stored_dialogs

#: Each user's one turn, and the label the turn gets: from the file, by utterance id, by
#: what was said (spelt otherwise), by dialog and turn; the last one's is stored with it.
TURNS = (
    ("What is Chorus?", "faq"),  # faq answered; the candidate's whatbot does not fit
    ("How are you?", "chat"),  # faq answered; the candidate's chat fits
    ("Why?", "llm"),  # faq, then chat: it fits neither
    ("hello", "chat"),  # chat both times
    ("tell me what you do", "whatbot"),  # chat answered; the candidate's whatbot fits
)


def test_labels_count_the_changed_turns_that_now_fit_and_no_longer_do(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    chat = service_entry(services(fixed_skill("chat", "let's chat", 0.6)).url)
    stored = {
        "services": {
            "skills": {
                "faq": service_entry(services(keyword_skill("faq", "?", 0.9)).url),
                "chat": chat,
                "reporter": service_entry(services(window_reporter()).url),
            }
        }
    }
    whatbot = service_entry(services(keyword_skill("whatbot", "what", 0.7)).url)
    files = {
        "same.json": stored,
        "whatbot.json": {"services": {"skills": {"chat": chat, "whatbot": whatbot}}},
    }
    for name, document in files.items():
        (tmp_path / name).write_text(json.dumps(document))
    with agents(tmp_path, db_url) as start:
        client = start(stored)
        replies = []
        for number, (text, label) in enumerate(TURNS):
            extra = {"skill_labels": [label]} if number == 4 else {}
            body = {"user_id": f"u{number}", "payload": text, **extra}
            response = client.post("/", json=body)
            assert response.is_success, response.text
            replies.append(response.json())
    humans = {d.dialog_id: d.utterances[0] for d in stored_dialogs(db_url)}
    stored_human = humans[replies[4]["dialog_id"]]
    assert isinstance(stored_human, HumanUtterance)
    assert stored_human.attributes["skill_labels"] == ["whatbot"]
    reporter = next(h for h in stored_human.hypotheses if h.skill_name == "reporter")
    assert "skill_labels" not in reporter.model_dump()["seen_attributes"]  # no skill sees it

    labels, first = tmp_path / "labels.jsonl", humans[replies[0]["dialog_id"]].utt_id
    lines: list[dict[str, Any]] = [
        {"utt_id": first, "skills": ["faq"]},
        {"text": "how are  YOU?", "skills": "chat"},
        {"dialog_id": replies[2]["dialog_id"], "turn": 1, "skills": ["llm", "fallback"]},
        {"dialog_id": replies[3]["dialog_id"], "turn": 1, "skills": "chat|faq"},
    ]
    labels.write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = store_snapshot(db_url)
    out, html = tmp_path / "diff.jsonl", tmp_path / "report.html"
    result = CliRunner().invoke(app, [
        "replay", "--db", db_url, "--labels", str(labels), "--candidate",
        str(tmp_path / "same.json"), "--candidate", str(tmp_path / "whatbot.json"),
        "--out", str(out), "--html", str(html), "--json", "--concurrency", "1",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert store_snapshot(db_url) == before

    runs = {run["pipeline"]: run["labels"] for run in json.loads(result.stdout)["runs"]}
    assert runs == {
        "same.json": {
            "labelled": 5, "stored_fit": 2, "candidate_fit": 2, "now_fit": 0, "no_longer_fit": 0
        },
        "whatbot.json": {
            "labelled": 5, "stored_fit": 2, "candidate_fit": 3, "now_fit": 2, "no_longer_fit": 1
        },
    }  # fmt: skip
    by_user = {
        d["user_id"]: (d["label"], d["stored_fits"], d["candidate_fits"])
        for d in map(json.loads, out.read_text().splitlines())
        if d["pipeline"] == "whatbot.json"
    }
    assert by_user == {
        "u0": (["faq"], True, False),
        "u1": (["chat"], False, True),
        "u2": (["fallback", "llm"], False, False),
        "u3": (["chat", "faq"], True, True),
        "u4": (["whatbot"], False, True),
    }
    table = parse(html.read_text()).by_id("side-by-side").rows()
    assert table[0] == ["", "same.json", "whatbot.json"]
    for row in (
        ["fit label, stored", "2 of 5", "2 of 5"],
        ["fit label, replayed", "2 of 5", "3 of 5"],
        ["changed, now fit", "0", "2"],
        ["changed, no longer fit", "0", "1"],
    ):
        assert row in table

    as_csv = tmp_path / "labels.csv"  # the same labels, as a CSV file
    as_csv.write_text(
        "utt_id,dialog_id,turn,text,skills\n"
        f"{first},,,,faq\n,,,how are  YOU?,chat\n"
        f",{replies[2]['dialog_id']},1,,llm|fallback\n,{replies[3]['dialog_id']},1,,chat|faq\n"
    )
    single = CliRunner().invoke(app, [
        "replay", "--db", db_url, "--labels", str(as_csv), "--html", str(html),
        "--candidate", str(tmp_path / "whatbot.json"), "--concurrency", "1",
    ])  # fmt: skip
    assert single.exit_code == 0, single.output
    said = [" ".join(line.split()) for line in single.stdout.splitlines()]
    assert "fit their label 2 of 5 3 of 5" in said
    assert "changed turns that now fit their label 2, no longer fit it 1" in said
    assert ["fit their label", "2 of 5", "3 of 5"] in parse(html.read_text()).rows()


def test_a_bad_label_file_is_refused_naming_its_line(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    hello = {
        "services": {"skills": {"hi": service_entry(services(fixed_skill("hi", "hi", 1)).url)}}
    }
    with agents(tmp_path, db_url) as start:
        reply = start(hello).post("/", json={"user_id": "ann", "payload": "hey"}).json()
    (dialog,) = stored_dialogs(db_url)
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps(hello))
    good = json.dumps({"utt_id": dialog.utterances[0].utt_id, "skills": ["hi"]})
    second = json.dumps({"dialog_id": reply["dialog_id"], "turn": 2, "skills": "x"})
    cases: list[tuple[str, str, str]] = [
        ("a.jsonl", f"{good}\n\n{{not json\n", "a.jsonl, line 3: not JSON"),
        ("b.jsonl", json.dumps({"utt_id": "nope", "skills": ["hi"]}),
         "b.jsonl, line 1: the store holds no answered utterance 'nope'"),
        ("c.jsonl", f"{good}\n{second}",
         f"c.jsonl, line 2: the store holds no answered turn 2 of dialog '{reply['dialog_id']}'"),
        ("d.jsonl", f"{good}\n{good}", "d.jsonl, line 2: this turn is labelled already, on line 1"),
        ("e.csv", "utt_id,skill\nx,hi\n", "e.csv, line 1: a CSV label file starts with a header"),
        ("f.csv", "text,skills\nhey,hi\nhello,\n", "f.csv, line 3: 'skills' must name"),
        ("g.jsonl", json.dumps({"skills": ["hi"]}), "g.jsonl, line 1: name the turn by"),
    ]  # fmt: skip
    for name, text, says in cases:
        labels = tmp_path / name
        labels.write_text(text)
        result = CliRunner().invoke(app, [
            "replay", "--pipeline", str(candidate), "--db", db_url, "--labels", str(labels)
        ])  # fmt: skip
        assert result.exit_code == 2, (name, result.output)
        assert says in " ".join(result.output.split()), (name, result.output)
        assert "Traceback" not in result.output
