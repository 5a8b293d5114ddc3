"""``chorus stats --by-arm``: an experiment's dialogs, turns, fallback rate and ratings per
arm, read from either store, and each arm against the reference arm: the difference with
its interval, an effect size and the better arm only when the evidence is enough."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from agent.sdk import DialogView, Service, SkillHypothesis
from tests.api.test_arms import Services, arm_pipelines, experiment_file, say
from tests.cli.test_stats import stats
from tests.conftest import AgentFactory, service_entry
from tests.support.services import counting_failure


def rate(client: httpx.Client, user: str, dialog_id: str, rating: float) -> None:
    body = {"dialog_id": dialog_id, "rating": rating, "user_id": user}
    assert client.post("/rating/dialog", json=body).is_success


def test_a_real_difference_names_the_better_arm_with_its_interval(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path, "a")
    # the candidate b: its one skill fails on the first turn of a dialog, so the pipeline's
    # fallback_response says it; later turns are answered by the fallback skill
    failing, _ = counting_failure()
    fallback = Service("fallback")

    @fallback.skill
    def after_the_first_turn(dialog: DialogView) -> list[SkillHypothesis]:
        if dialog.human_utterance.text == "hello":
            return []
        return [SkillHypothesis(text="tell me more", confidence=0.1)]

    broken = {
        "services": {
            "skills": {
                "skill": service_entry(services(failing).url),
                "fallback": service_entry(services(fallback.app).url, timeout=10),
            }
        }
    }
    (tmp_path / "b.json").write_text(json.dumps(broken))
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1}))
    turns = {"a": 0, "b": 0}
    rated = {"a": 0, "b": 0}
    answered_by = {"fallback": 0, "fallback_response": 0}
    i = 0
    while min(rated.values()) < 30:
        user = f"user-{i}"
        first = say(client, user)
        second = say(client, user, "and again")
        arm = "a" if first["response"] == "arm a" else "b"
        turns[arm] += 2
        for answer in (first, second):
            if answer["active_skill"] in answered_by:
                answered_by[answer["active_skill"]] += 1
        # the candidate b is rated 1 to 3, the control a 3 to 5
        rate(client, user, first["dialog_id"], (3 if arm == "a" else 1) + rated[arm] % 3)
        rated[arm] += 1
        i += 1
    assert answered_by["fallback"] > 0  # both kinds of fallback were said
    assert answered_by["fallback_response"] > 0

    result = stats("--by-arm", "--db-url", db_url, "--json", "--control", "a")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    arms = {row["arm"]: row for row in report["arms"]}
    assert set(arms) == {"a", "b"}
    assert (arms["a"]["turns"], arms["b"]["turns"]) == (turns["a"], turns["b"])
    # the fallback rate counts what the fallback skill and the fallback response answered
    assert arms["b"]["fallback_skill_answers"] == answered_by["fallback"]
    assert arms["b"]["fallback_responses"] == answered_by["fallback_response"]
    assert (arms["a"]["fallback_rate"], arms["b"]["fallback_rate"]) == (0.0, 1.0)
    tests = {c["metric"]: c for c in report["comparisons"]}
    rating = tests["rating"]
    assert (rating["arm"], rating["reference"]) == ("b", "a")
    assert rating["difference"] == arms["b"]["mean_rating"] - arms["a"]["mean_rating"]
    low, high = rating["difference_ci95"]
    assert low < rating["difference"] < high < 0
    assert rating["significant"] and rating["better"] == "a"
    assert -1 <= rating["effect_size"] < 0
    assert tests["fallback rate"]["better"] == "a"

    table = stats("--by-arm", "--db-url", db_url, "--control", "a")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["arm", "dialogs", "turns", "fallback"]
    assert lines[2].split()[:4] == ["b", str(arms["b"]["dialogs"]), str(turns["b"]), "100.0%"]
    assert f"rating, b minus a: {rating['difference']:+.2f} (95% interval {low:+.2f} to " in (
        table.stdout
    )
    assert "  significant at 5%: a is better" in lines
    assert any(line.startswith("  effect size (rank-biserial correlation) -") for line in lines)
    assert any("Mann-Whitney U: U of b = " in line for line in lines)


def test_four_ratings_per_arm_are_too_few_to_call_significant(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1}))
    rated = {"arm a": 0, "arm b": 0}
    i = 0
    while min(rated.values()) < 4:
        user = f"user-{i}"
        answer = say(client, user)
        i += 1
        if rated[answer["response"]] == 4:
            continue
        # a rated 4 or 5, b 1 or 2: as far apart as 4 ratings can be (Mann-Whitney p 0.029)
        low = 4 if answer["response"] == "arm a" else 1
        rate(client, user, answer["dialog_id"], low + rated[answer["response"]] % 2)
        rated[answer["response"]] += 1

    result = stats("--by-arm", "--db-url", db_url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "significant" not in result.stdout, lines
    assert any(line.startswith("rating, b minus a: -3.00 (95% interval") for line in lines)
    assert (
        "  too few to decide: 4 and 4 rated dialogs, at least 30 per arm are needed for a "
        "verdict; " in result.stdout
    )
    assert "fallback rate: not compared (the same in every arm: none or all)" in lines
    report = json.loads(stats("--by-arm", "--db-url", db_url, "--json").stdout)
    (rating,) = report["comparisons"]
    assert rating["p_value"] < 0.05  # what used to be called significant
    assert not rating["significant"] and rating["better"] is None


def test_arms_rated_alike_are_compared_with_the_first_and_none_is_called_better(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path, "abc")
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1, "c": 1}))
    rated = {"arm a": 0, "arm b": 0, "arm c": 0}
    i = 0
    while min(rated.values()) < 30:
        user = f"user-{i}"
        answer = say(client, user)
        i += 1
        if rated[answer["response"]] == 30:
            continue
        # each arm's k-th rated dialog gets the same rating: the same 30 ratings on each
        rate(client, user, answer["dialog_id"], 1 + rated[answer["response"]] % 5)
        rated[answer["response"]] += 1

    result = stats("--by-arm", "--db-url", db_url, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["reference"] == "a"  # no arm is named control: the first by name
    ratings = [c for c in report["comparisons"] if c["metric"] == "rating"]
    assert [(c["arm"], c["reference"]) for c in ratings] == [("b", "a"), ("c", "a")]
    for c in ratings:
        assert c["samples"] == [30, 30] and c["enough_data"]
        assert c["difference"] == 0
        low, high = c["difference_ci95"]
        assert low < 0 < high
        assert (c["significant"], c["better"], c["needed_per_arm"]) == (False, None, None)

    table = stats("--by-arm", "--db-url", db_url, "--control", "c")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert any(line.startswith("rating, a minus c: +0.00 (95% interval -") for line in lines)
    assert lines.count("  not significant at 5%: no better arm") == 2, lines
    assert "is better" not in table.stdout

    unknown = stats("--by-arm", "--db-url", db_url, "--control", "d")
    assert unknown.returncode == 1
    assert "no dialog is on arm 'd' (arms: a, b, c)" in unknown.stderr
