"""`chorus eval` and `chorus export-parlai` against a running agent whose skill speaks ParlAI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.cli.main import app
from agent.parlai.formats import read_episodes
from tests.conftest import AgentFactory
from tests.support.services import where_is_parlai_agent

# The evaluation reaches the agent at its URL: a served agent.
pytestmark = pytest.mark.served

CANDIDATES = "label_candidates:kitchen|bathroom|garden|hallway"
DATASET = (
    "\n".join(
        [
            "id:babi:1\ttext:Mary moved to the bathroom.\\nWhere is Mary?\tlabels:bathroom"
            f"\t{CANDIDATES}",
            "id:babi:1\ttext:John went to the hallway.\\nWhere is Mary?\tlabels:bathroom"
            f"\t{CANDIDATES}"
            "\tepisode_done:True",
            f"id:babi:2\ttext:Sandra journeyed to the garden.\\nWhere is Sandra?\tlabels:garden"
            f"\t{CANDIDATES}\tepisode_done:True",
        ]
    )
    + "\n"
)


KEY = "a-key-of-at-least-16-chars"


def start_agent(services: Any, agent: AgentFactory, **settings: Any) -> str:
    skill = services(where_is_parlai_agent())
    client = agent(
        {
            "services": {
                "skills": {
                    "where_is": {"connector": {"url": f"{skill.url}/act", "protocol": "parlai"}}
                }
            }
        },
        **settings,
    )
    return str(client.base_url)


@pytest.fixture
def agent_url(services: Any, agent: AgentFactory) -> str:
    return start_agent(services, agent)


def test_eval_replays_episodes_and_scores_them_as_computed_by_hand(
    agent_url: str, tmp_path: Path
) -> None:
    dataset = tmp_path / "babi.txt"
    dataset.write_text(DATASET)
    report_path = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["eval", str(dataset), "--url", agent_url, "--json", str(report_path)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    # Turn 1: "bathroom", right.                        EM 1, F1 1, hits@1 1, MRR 1
    # Turn 2: "hallway" (last place named); candidates ranked hallway, kitchen, bathroom,
    #         garden -> the label is 3rd.               EM 0, F1 0, hits@1 0, hits@5 1, MRR 1/3
    # Turn 3: "garden", right.                          EM 1, F1 1, hits@1 1, MRR 1
    first, second = report["episodes"]
    assert (first["turns"], first["scored"]) == (2, 2)
    assert first["exact_match"] == 0.5 and first["hits_at_1"] == 0.5
    assert first["hits_at_5"] == 1.0
    assert first["mrr"] == pytest.approx((1 + 1 / 3) / 2)
    assert (second["exact_match"], second["f1"], second["mrr"]) == (1.0, 1.0, 1.0)
    overall = report["overall"]
    assert overall["turns"] == 3
    assert overall["exact_match"] == pytest.approx(2 / 3)
    assert overall["f1"] == pytest.approx(2 / 3)
    assert overall["hits_at_5"] == 1.0
    assert overall["mrr"] == pytest.approx(7 / 9)
    assert "overall" in result.output and "0.778" in result.output

    exported = tmp_path / "export.txt"
    dialogs = [f"--dialog={e['dialog_id']}" for e in report["episodes"]]
    result = CliRunner().invoke(app, ["export-parlai", str(exported), "--url", agent_url, *dialogs])
    assert result.exit_code == 0, result.output
    episodes = read_episodes(exported)
    assert [[ex["labels"] for ex in ep] for ep in episodes] == [
        [["bathroom"], ["hallway"]],
        [["garden"]],
    ]
    assert episodes[0][1]["text"] == "John went to the hallway.\nWhere is Mary?"
    assert episodes[0][0]["label_candidates"] == ["kitchen", "bathroom", "garden", "hallway"]
    assert episodes[0][0]["id"] == "where_is"


def test_the_shipped_sample_replays_as_the_docs_say(
    agent_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/parlai.md's `chorus eval tasks/babi.txt`, run from the repository's root."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    episodes = read_episodes(Path("tasks/babi.txt"))
    assert [len(episode) for episode in episodes] == [3, 2, 3]
    report_path = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["eval", "tasks/babi.txt", "--url", agent_url, "--json", str(report_path)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    assert [episode["scored"] for episode in report["episodes"]] == [3, 2, 3]
    assert report["overall"]["turns"] == 8
    assert report["overall"]["exact_match"] > 0  # the where-is skill gets some right


def test_eval_names_a_bad_line(tmp_path: Path) -> None:
    dataset = tmp_path / "bad.txt"
    dataset.write_text("text:ok\tepisode_done:True\nbroken line\n")
    result = CliRunner().invoke(app, ["eval", str(dataset), "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "bad.txt:2" in result.output


def test_eval_says_when_the_agent_is_not_there(tmp_path: Path) -> None:
    dataset = tmp_path / "one.txt"
    dataset.write_text("text:hi\tlabels:hello\tepisode_done:True\n")
    result = CliRunner().invoke(app, ["eval", str(dataset), "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "error" in result.output


def test_eval_and_export_read_a_keyed_deployment_with_the_key(
    services: Any, agent: AgentFactory, tmp_path: Path
) -> None:
    """As docker compose runs the agent: CHORUS_API_KEY set, and here the chat protected
    too, so `chorus eval` needs the key as much as `chorus export-parlai` does."""
    url = start_agent(services, agent, api_key=KEY, protect_chat=True)
    dataset = tmp_path / "babi.txt"
    dataset.write_text(DATASET)
    report_path = tmp_path / "report.json"
    runner = CliRunner()

    refused = runner.invoke(app, ["eval", str(dataset), "--url", url])
    assert refused.exit_code == 1
    assert "401" in refused.output and "--api-key" in refused.output

    result = runner.invoke(
        app,
        ["eval", str(dataset), "--url", url, "--json", str(report_path)],
        env={"CHORUS_API_KEY": KEY},
    )
    assert result.exit_code == 0, result.output
    dialogs = [
        f"--dialog={e['dialog_id']}" for e in json.loads(report_path.read_text())["episodes"]
    ]

    exported = tmp_path / "export.txt"
    refused = runner.invoke(
        app, ["export-parlai", str(exported), "--url", url, *dialogs], env={"CHORUS_API_KEY": ""}
    )
    assert refused.exit_code == 1
    assert "401" in refused.output and "--api-key" in refused.output
    wrong = runner.invoke(
        app,
        ["export-parlai", str(exported), "--url", url, "--api-key", "not-the-key-at-all", *dialogs],
    )
    assert wrong.exit_code == 1 and "the agent's key" in wrong.output

    result = runner.invoke(
        app, ["export-parlai", str(exported), "--url", url, "--api-key", KEY, *dialogs]
    )
    assert result.exit_code == 0, result.output
    assert [[ex["labels"] for ex in ep] for ep in read_episodes(exported)] == [
        [["bathroom"], ["hallway"]],
        [["garden"]],
    ]


def test_eval_leaves_out_what_json_cannot_carry(
    services: Any, agent: AgentFactory, tmp_path: Path
) -> None:
    """A text dataset's ``reward:nan`` is a float JSON cannot carry: the observation is sent
    JSON-safe (as ParlAI's ``Message.json_safe_payload``), so the turn is played and the
    previous answer left unrated, while a finite reward still rates its answer."""
    skill = services(where_is_parlai_agent())
    client = agent(
        {
            "services": {
                "skills": {
                    "where_is": {"connector": {"url": f"{skill.url}/act", "protocol": "parlai"}}
                }
            }
        }
    )
    dataset = tmp_path / "rewards.txt"
    dataset.write_text(
        "text:Mary moved to the bathroom.\tlabels:bathroom\n"
        "text:John went to the hallway.\treward:nan\tlabels:hallway\n"
        "text:Where is John?\treward:1\tlabels:hallway\tepisode_done:True\n"
    )
    report_path = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["eval", str(dataset), "--url", str(client.base_url), "--json", str(report_path)]
    )
    assert result.exit_code == 0, result.output
    (episode,) = json.loads(report_path.read_text())["episodes"]
    assert (episode["turns"], episode["scored"], episode["exact_match"]) == (3, 3, 1.0)
    dialog = client.get(f"/api/dialogs/{episode['dialog_id']}").json()
    bots = [u for u in dialog["utterances"] if u["speaker"] == "bot"]
    assert [b["rating"] for b in bots] == [None, 1.0, None]
    humans = [u for u in dialog["utterances"] if u["speaker"] == "human"]
    assert "reward" not in humans[1]["attributes"]
