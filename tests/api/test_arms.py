"""Pipeline arms (``CHORUS_EXPERIMENT``): each new dialog runs on one arm's pipeline, drawn
from its user's id, the same on every replica; with ``CHORUS_ARM_KEY`` the draw cannot be
computed from the experiment's name; the arm is stored on the dialog, so a weight or key
change or a restart moves no dialog that exists; it shows in the dp-agent view, the
``/pipeline`` API and the per-arm metrics, and a bad experiment file stops the agent."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent.api.app import create_app
from agent.settings import Settings
from agent.turn.config import PipelineConfigError
from tests.cli.test_backup import run
from tests.conftest import AgentFactory, agents, fresh_mongodb_database, service_entry
from tests.support.ports import free_port
from tests.support.servers import ServerThread, serving
from tests.support.services import counting_failure, fixed_skill
from tests.support.stored import stored_dialogs

Services = Callable[[FastAPI], ServerThread]


#: An operator's CHORUS_ARM_KEY.
ARM_KEY = "b7c1f0e2d9a84c3e9f1a2b3c4d5e6f70"


def arm_pipelines(services: Services, folder: Path, arms: str = "ab") -> None:
    """``{arm}.json`` in ``folder`` for each arm: one skill answering "arm {arm}"."""
    for arm in arms:
        url = services(fixed_skill("skill", f"arm {arm}", 0.9)).url
        pipeline = {"services": {"skills": {"skill": service_entry(url, timeout=10)}}}
        (folder / f"{arm}.json").write_text(json.dumps(pipeline))


def experiment_file(folder: Path, weights: dict[str, float], name: str = "trial") -> Path:
    path = folder / "experiment.json"
    arms = [{"name": a, "pipeline": f"{a}.json", "weight": w} for a, w in weights.items()]
    path.write_text(json.dumps({"name": name, "arms": arms}))
    return path


def say(client: httpx.Client, user: str, text: str = "hello") -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def stored_arms(client: httpx.Client, user: str) -> list[str | None]:
    return [d["arm"] for d in client.get(f"/api/user/{user}").json()]


# 100 users are enough for both checks: a user split between arms shows in any user, and
# the draw is a keyed hash of fixed ids (45 and 55 here), so the share is no sample's luck.
def test_two_replicas_on_one_store_split_users_evenly_and_never_split_a_user(
    services: Services, agent: AgentFactory, db_url: str, tmp_path: Path
) -> None:
    """Two agents on one store, each its own app, store connection and draw, as two replicas'
    processes are: the draw is a keyed hash of the user's id, and the arm of a dialog is read
    from the store (agent processes on one database, nothing shared but the store:
    tests/api/test_handoff_processes.py)."""
    arm_pipelines(services, tmp_path)
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    users = [f"user-{i}" for i in range(100)]
    # the same key on both, as an operator sets it
    replicas = [agent({}, experiment=experiment, arm_key=ARM_KEY) for _ in range(2)]

    def two_dialogs(i: int) -> list[str]:
        """The user's first dialog on one replica, a second on the other."""
        user, one, other = users[i], replicas[i % 2], replicas[1 - i % 2]
        answers = [say(one, user)["response"]]
        say(other, user, "/close")
        answers.append(say(other, user)["response"])
        return answers

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(two_dialogs, range(len(users))))
    arms: dict[str, list[str | None]] = {user: [] for user in users}
    for dialog in stored_dialogs(db_url):  # in the order they were opened
        arms[dialog.human.user_external_id].append(dialog.arm)

    for user, (first_answer, second_answer) in zip(users, answers, strict=True):
        first_arm, second_arm = arms[user]
        assert first_arm == second_arm, f"{user}'s dialogs were split between arms"
        # each dialog was answered by its stored arm's pipeline
        assert first_answer == second_answer == f"arm {first_arm}"
    per_arm = Counter(user_arms[0] for user_arms in arms.values())
    assert set(per_arm) == {"a", "b"}
    assert 40 <= per_arm["a"] <= 60 and 40 <= per_arm["b"] <= 60, per_arm


def test_changing_the_weights_and_restarting_keeps_existing_dialogs_on_their_arm(
    services: Services, agent: AgentFactory, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    users = [f"user-{i}" for i in range(40)]
    before = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1}))
    first = {user: say(before, user)["response"] for user in users}
    assert set(first.values()) == {"arm a", "arm b"}

    # Another agent on the same store, after nearly every new dialog was moved to b.
    after = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 1_000_000}))
    for user in users:
        assert say(after, user, "still there?")["response"] == first[user]
        (arm,) = stored_arms(after, user)
        assert f"arm {arm}" == first[user]
    newcomers = [say(after, f"new-{i}")["response"] for i in range(20)]
    assert newcomers == ["arm b"] * 20


def test_the_arm_shows_in_the_dp_agent_dialect_the_pipeline_api_and_the_metrics(
    services: Services, agent: AgentFactory, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path, "a")
    failing, _ = counting_failure()
    broken = {"services": {"skills": {"broken": service_entry(services(failing).url)}}}
    (tmp_path / "b.json").write_text(json.dumps(broken))
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 3}))
    answers = {f"user-{i}": say(client, f"user-{i}") for i in range(12)}
    on_b = [u for u in answers if answers[u]["active_skill"] == "fallback_response"]
    assert on_b and len(on_b) < len(answers)  # both arms drawn; b always falls back

    dialog_id = answers[on_b[0]]["dialog_id"]
    view = client.get(f"/api/dialogs/{dialog_id}", params={"view": "dp-agent"}).json()
    assert view["attributes"]["arm"] == "b"
    assert view["attributes"]["pipeline"] == ["broken"]  # the services of b's pipeline

    info = client.get("/api/pipeline").json()["experiment"]
    assert info["name"] == "trial"
    arms = {arm["name"]: arm for arm in info["arms"]}
    assert arms["a"]["share"] == pytest.approx(0.25) and arms["b"]["share"] == pytest.approx(0.75)
    assert arms["b"]["turns"] == arms["b"]["fallbacks"] == len(on_b)
    assert (arms["a"]["turns"], arms["a"]["fallbacks"]) == (len(answers) - len(on_b), 0)

    assert client.post(
        "/rating/dialog", json={"dialog_id": dialog_id, "rating": 2, "user_id": on_b[0]}
    ).is_success
    metrics = client.get("/metrics").text.splitlines()
    assert f'chorus_arm_turns_total{{arm="b"}} {float(len(on_b))}' in metrics
    assert f'chorus_arm_fallback_answers_total{{arm="b"}} {float(len(on_b))}' in metrics
    assert 'chorus_arm_fallback_answers_total{arm="a"} 0.0' in metrics
    assert f'chorus_arm_turn_seconds_count{{arm="a"}} {float(len(answers) - len(on_b))}' in metrics
    assert 'chorus_arm_ratings_sum{arm="b"} 2.0' in metrics
    assert 'chorus_arm_ratings_count{arm="a"} 0.0' in metrics


def public_draw(experiment: str, user: str) -> str:
    """The arm of ``user`` on a two-arm experiment of equal weights as anyone can compute it
    who knows the experiment's name (it is on the /pipeline page and in the docs): the draw
    keyed with the name alone."""
    key = hashlib.blake2b(experiment.encode(), digest_size=32).digest()
    digest = hashlib.blake2b(user.encode(), key=key, digest_size=8).digest()
    return "a" if int.from_bytes(digest, "big") / 2**64 < 0.5 else "b"


def test_with_an_arm_key_no_one_can_compute_a_users_arm_from_the_experiments_name(
    services: Services, agent: AgentFactory, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    users = [f"user-{i}" for i in range(40)]
    unkeyed = agent({}, experiment=experiment)
    computed = {user: say(unkeyed, user)["response"].removeprefix("arm ") for user in users}
    assert computed == {user: public_draw("trial", user) for user in users}  # the exposure

    keyed = agent({}, experiment=experiment, arm_key=ARM_KEY)
    drawn = {user: say(keyed, f"{user}+k")["response"].removeprefix("arm ") for user in users}
    guessed = {user: public_draw("trial", f"{user}+k") for user in users}
    wrong = [user for user in users if drawn[user] != guessed[user]]
    # Independent of the name's draw, the guess is a coin toss: right for about half.
    assert len(wrong) >= len(users) // 4, (drawn, guessed)
    assert set(drawn.values()) == {"a", "b"}


@pytest.mark.store_agnostic
def test_an_experiment_without_an_arm_key_is_warned_of_at_start_up(
    services: Services, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    arm_pipelines(services, tmp_path)
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    create_app(Settings(db_url=db_url, experiment=experiment))
    warned = [r.getMessage() for r in caplog.records if "CHORUS_ARM_KEY" in r.getMessage()]
    assert warned and "choose its arm" in warned[0]
    caplog.clear()
    create_app(Settings(db_url=db_url, experiment=experiment, arm_key=ARM_KEY))
    assert not [r for r in caplog.records if "CHORUS_ARM_KEY" in r.getMessage()]


@pytest.mark.store_agnostic
def test_the_agents_start_up_log_names_the_experiment_its_arms_and_their_services(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lines the agent logs as it is made, in the test's process: the same
    ``create_app`` that ``python -m agent.api.serve`` calls (a served agent's stderr carries
    the agent's log lines: tests/cli/test_run.py). No service is called at start-up, so
    the arms' services are URLs nothing answers."""
    nowhere = "http://127.0.0.1:9"
    one = {"skill": service_entry(nowhere)}
    both = {name: service_entry(nowhere) for name in ("faq", "fallback")}
    (tmp_path / "a.json").write_text(json.dumps({"services": {"skills": one}}))
    (tmp_path / "b.json").write_text(json.dumps({"services": {"skills": both}}))
    experiment = experiment_file(tmp_path, {"a": 3, "b": 1}, name="selector-v2")
    caplog.set_level(logging.INFO)
    create_app(Settings(db_url=db_url, experiment=experiment, arm_key=ARM_KEY))
    lines = [record.getMessage() for record in caplog.records]
    expected = [
        f"experiment 'selector-v2' ({experiment}): 2 arms (a, b), the draw keyed with "
        "CHORUS_ARM_KEY",
        f"experiment 'selector-v2', arm a: 75.0% of new dialogs (weight 3), pipeline "
        f"{tmp_path / 'a.json'}, 1 services: skill",
        f"experiment 'selector-v2', arm b: 25.0% of new dialogs (weight 1), pipeline "
        f"{tmp_path / 'b.json'}, 2 services: ",
    ]
    logged = {line: [x for x in lines if line in x] for line in expected}
    assert all(len(found) == 1 for found in logged.values()), (logged, lines)
    assert logged[expected[1]][0].endswith(expected[1])
    (arm_b,) = logged[expected[2]]
    assert set(arm_b.split(expected[2])[1].split(", ")) == {"faq", "fallback"}
    caplog.clear()
    create_app(Settings(db_url=db_url, experiment=experiment))
    assert any(
        record.getMessage().endswith("the draw keyed with the name alone (no CHORUS_ARM_KEY)")
        for record in caplog.records
    )


def test_agents_with_the_same_arm_key_agree_on_every_users_arm(
    services: Services, agent: AgentFactory, other_db: str, tmp_path: Path
) -> None:
    """Replicas share nothing to agree on a draw: the same key, on two agents that do not
    even share a store, gives every user the same arm."""
    arm_pipelines(services, tmp_path)
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    users = [f"user-{i}" for i in range(40)]
    one = agent({}, experiment=experiment, arm_key=ARM_KEY)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    with agents(folder, other_db) as elsewhere:
        other = elsewhere({}, experiment=experiment, arm_key=ARM_KEY)
        arms = [{user: say(client, user)["response"] for user in users} for client in (one, other)]
    assert arms[0] == arms[1]
    assert set(arms[0].values()) == {"arm a", "arm b"}


def test_setting_an_arm_key_moves_no_dialog_that_exists(
    services: Services, agent: AgentFactory, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    users = [f"user-{i}" for i in range(40)]
    before = agent({}, experiment=experiment)
    first = {user: say(before, user)["response"] for user in users}

    # A restart with a key, on the same store: every open dialog goes on on its arm.
    after = agent({}, experiment=experiment, arm_key=ARM_KEY)
    moved = []
    for user in users:
        assert say(after, user, "still there?")["response"] == first[user]
        say(after, user, "/close")
        reopened = say(after, user, "a new dialog")["response"]
        closed, opened = stored_arms(after, user)
        assert f"arm {closed}" == first[user]  # the closed one keeps its arm too
        assert f"arm {opened}" == reopened
        if opened != closed:
            moved.append(user)
    assert moved  # the key does place new dialogs: some users' next dialog is elsewhere


@pytest.fixture
def other_db(request: pytest.FixtureRequest, db_url: str, tmp_path: Path) -> str:
    """The other kind of store than the agent's."""
    if db_url.startswith("sqlite"):
        return fresh_mongodb_database(request, "mongodb")
    return f"sqlite:///{tmp_path}/restored.db"


def test_an_export_imported_into_the_other_store_keeps_each_dialogs_arm(
    services: Services, agent: AgentFactory, db_url: str, other_db: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    source = agent({}, experiment=experiment)
    users = [f"user-{i}" for i in range(10)]
    before = {user: say(source, user)["response"] for user in users}
    assert set(before.values()) == {"arm a", "arm b"}

    backup = tmp_path / "backup.jsonl"
    exported = run("export", "--all", "--output", str(backup), "--db", db_url)
    assert exported.exit_code == 0, exported.output
    imported = run("import", str(backup), "--db", other_db)
    assert imported.exit_code == 0, imported.output

    # On the other store, under other weights, each imported dialog goes on on its arm.
    weights = experiment_file(tmp_path, {"a": 1_000_000, "b": 1})
    app = create_app(Settings(db_url=other_db, experiment=weights))
    with serving(app) as server, httpx.Client(base_url=server.url, timeout=30) as restored:
        for user in users:
            assert [f"arm {arm}" for arm in stored_arms(restored, user)] == [before[user]]
            assert say(restored, user, "back again")["response"] == before[user]


@pytest.mark.store_agnostic
@pytest.mark.parametrize(
    ("experiment", "named"),
    [
        ({"name": "t", "arms": [{"name": "a", "pipeline": "a.json", "weight": 1}]}, "arms"),
        (
            {
                "name": "t",
                "arms": [
                    {"name": "a", "pipeline": "a.json", "weight": 1},
                    {"name": "b", "pipeline": "missing.json", "weight": 1},
                ],
            },
            "arms.1.pipeline (b): cannot read pipeline config",
        ),
        (
            {
                "name": "t",
                "arms": [
                    {"name": "a", "pipeline": "a.json", "weight": 0},
                    {"name": "b", "pipeline": "a.json", "weight": 1},
                ],
            },
            "arms.0.weight",
        ),
        (
            {
                "name": "t",
                "arms": [
                    {"name": "a", "pipeline": "a.json", "weight": 1},
                    {"name": "a", "pipeline": "a.json", "weight": 1},
                ],
            },
            "arm name(s) a used more than once",
        ),
        ({"arms": []}, "name: Field required"),
    ],
)
def test_a_bad_experiment_file_stops_the_agent_naming_what_to_fix(
    db_url: str, tmp_path: Path, experiment: dict[str, Any], named: str
) -> None:
    unused = {"services": {"skills": {"skill": service_entry("http://127.0.0.1:9")}}}
    (tmp_path / "a.json").write_text(json.dumps(unused))
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(experiment))
    with pytest.raises(PipelineConfigError) as refused:
        create_app(Settings(db_url=db_url, experiment=path))
    assert str(path) in str(refused.value) and named in str(refused.value)


@pytest.mark.store_agnostic
def test_ready_waits_for_the_services_every_arm_requires(
    services: Services, db_url: str, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path, "a")
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    candidate = {
        "services": {
            "annotators": {"tokens": service_entry(nobody)},
            "skills": {
                "skill": service_entry(
                    services(fixed_skill("skill", "arm b", 0.9)).url,
                    required_previous_services=["tokens"],
                )
            },
        }
    }
    (tmp_path / "b.json").write_text(json.dumps(candidate))
    experiment = experiment_file(tmp_path, {"a": 1, "b": 1})
    settings = Settings(db_url=db_url, experiment=experiment, ready_services=["tokens"])
    with serving(create_app(settings)) as server, httpx.Client(base_url=server.url) as client:
        ready = client.get("/ready")
    assert ready.status_code == 503
    assert set(ready.json()["services"]) == {"tokens"}  # only arm b's pipeline has it
