"""``chorus stats --by-arm``: an experiment's dialogs, turns, fallback rate and ratings per
arm, read from either store, and whether the arms differ by scipy's tests."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.api.test_arms import Services, arm_pipelines, experiment_file, say
from tests.cli.test_stats import stats
from tests.conftest import AgentFactory, service_entry
from tests.support.services import counting_failure


def rate(client: httpx.Client, user: str, dialog_id: str, rating: float) -> None:
    body = {"dialog_id": dialog_id, "rating": rating, "user_id": user}
    assert client.post("/rating/dialog", json=body).is_success


def test_an_arm_that_falls_back_and_is_rated_lower_is_significantly_different(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path, "a")
    failing, _ = counting_failure()
    broken = {"services": {"skills": {"skill": service_entry(services(failing).url)}}}
    (tmp_path / "b.json").write_text(json.dumps(broken))
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1}))
    turns = {"a": 0, "b": 0}
    for i in range(30):
        user = f"user-{i}"
        first = say(client, user)
        arm = "b" if first["active_skill"] == "fallback_response" else "a"
        say(client, user, "and again")
        turns[arm] += 2
        # the candidate b is rated 1 or 2, the control a 4 or 5
        rate(client, user, first["dialog_id"], (4 if arm == "a" else 1) + i % 2)
    unrated = say(client, "unrated", "one more")  # a dialog without a rating counts too
    turns["b" if unrated["active_skill"] == "fallback_response" else "a"] += 1

    result = stats("--by-arm", "--db-url", db_url, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    arms = {row["arm"]: row for row in report["arms"]}
    assert set(arms) == {"a", "b"}
    assert (arms["a"]["turns"], arms["b"]["turns"]) == (turns["a"], turns["b"])
    assert arms["a"]["dialogs"] + arms["b"]["dialogs"] == 31
    assert (arms["a"]["fallback_rate"], arms["b"]["fallback_rate"]) == (0.0, 1.0)
    assert 4 <= arms["a"]["mean_rating"] <= 5 and 1 <= arms["b"]["mean_rating"] <= 2
    low, high = arms["a"]["rating_ci95"]
    assert low < arms["a"]["mean_rating"] < high
    tests = {c["metric"]: c for c in report["comparisons"]}
    assert tests["rating"]["test"] == "Mann-Whitney U" and tests["rating"]["significant"]
    assert tests["fallback rate"]["test"] == "Fisher's exact"
    assert tests["fallback rate"]["significant"]

    table = stats("--by-arm", "--db-url", db_url)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["arm", "dialogs", "turns", "fallback"]
    assert lines[2].split()[:4] == [
        "b",
        str(arms["b"]["dialogs"]),
        str(arms["b"]["turns"]),
        "100.0%",
    ]
    assert any(line.startswith("rating: significant at 5% (Mann-Whitney U") for line in lines)


def test_arms_rated_alike_are_not_called_different(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1}))
    seen = {"arm a": 0, "arm b": 0}
    for i in range(40):
        user = f"user-{i}"
        answer = say(client, user)
        # each arm's k-th rated dialog gets the same rating: the same spread on both
        rate(client, user, answer["dialog_id"], 1 + seen[answer["response"]] % 5)
        seen[answer["response"]] += 1

    result = stats("--by-arm", "--db-url", db_url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("rating: not significant at 5%") for line in lines), lines
    assert "fallback rate: not compared (the same in every arm: none or all)" in lines
