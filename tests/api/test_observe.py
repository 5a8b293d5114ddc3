"""`POST /api/v1/chat`: ParlAI observations in, acts out, every standard field honoured."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from agent.state.storage_limits import StorageLimits
from tests.conftest import AgentFactory, service_entry
from tests.support.services import fixed_skill, image_annotator, window_reporter


def pipeline(services: Any) -> dict[str, Any]:
    return {
        "services": {
            "annotators": {"vision": service_entry(services(image_annotator()).url)},
            "skills": {
                "sure": service_entry(services(fixed_skill("sure", "sheep", 0.9)).url),
                "unsure": service_entry(services(fixed_skill("unsure", "wolf", 0.3)).url),
                "reporter": service_entry(services(window_reporter()).url),
            },
        }
    }


@pytest.fixture
def client(services: Any, agent: AgentFactory) -> httpx.Client:
    return agent(pipeline(services), limits=StorageLimits(max_image_bytes=1000))


@pytest.fixture(scope="module")
def shared_client(shared_services: Any, shared_agent: AgentFactory) -> httpx.Client:
    """The same agent, shared by the tests of observations refused before the store."""
    return shared_agent(pipeline(shared_services), limits=StorageLimits(max_image_bytes=1000))


def observe(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/chat", json={"user_id": "ann", **fields})
    assert response.status_code == 200, response.text
    act: dict[str, Any] = response.json()
    return act


def stored_turn(client: httpx.Client, act: dict[str, Any]) -> dict[str, Any]:
    dialog: dict[str, Any] = client.get(f"/api/dialogs/{act['dialog_id']}").json()
    return dialog


def test_an_act_answers_with_the_active_skill_and_ranked_candidates(
    client: httpx.Client,
) -> None:
    act = observe(client, text="What is winona afraid of?", id="babi:task1k:15")
    assert act["text"] == "sheep" and act["id"] == "sure"
    assert act["text_candidates"] == ["sheep", "I saw 1 utterances", "wolf"]
    assert act["episode_done"] is False and "metrics" not in act
    human = stored_turn(client, act)["utterances"][0]
    assert human["attributes"]["id"] == "babi:task1k:15"


def test_labels_become_eval_labels_and_never_reach_skills(client: httpx.Client) -> None:
    act = observe(
        client,
        text="What is winona afraid of?",
        labels=["sheep"],
        label_candidates=["wolf", "mouse", "cat", "sheep"],
        story="bAbI",
    )
    assert act["metrics"] == {
        "exact_match": 1.0,
        "f1": 1.0,
        "hits_at_1": 1.0,
        "hits_at_5": 1.0,
        "mrr": 1.0,
    }
    human = stored_turn(client, act)["utterances"][0]
    assert human["attributes"]["eval_labels"] == ["sheep"]
    assert "labels" not in human["attributes"]
    assert human["attributes"]["story"] == "bAbI"
    reporter = next(h for h in human["hypotheses"] if h["skill_name"] == "reporter")
    assert "eval_labels" not in reporter["seen_attributes"]
    assert reporter["seen_attributes"]["label_candidates"] == ["wolf", "mouse", "cat", "sheep"]


def test_metrics_of_a_wrong_answer_rank_the_label_candidates(client: httpx.Client) -> None:
    act = observe(
        client,
        text="What is emily afraid of?",
        eval_labels=["wolf"],
        label_candidates=["mouse", "wolf", "cat", "sheep"],
    )
    # ranked answers: sheep, "I saw..", wolf -> candidates: sheep, wolf, mouse, cat
    assert act["metrics"] == {
        "exact_match": 0.0,
        "f1": 0.0,
        "hits_at_1": 0.0,
        "hits_at_5": 1.0,
        "mrr": 0.5,
    }


def test_episode_done_closes_the_dialog_after_the_answer(client: httpx.Client) -> None:
    first = observe(client, text="one", episode_done=True)
    assert first["episode_done"] is True
    assert stored_turn(client, first)["date_finish"] is not None
    second = observe(client, text="two")
    assert second["dialog_id"] != first["dialog_id"]


def test_reward_rates_the_previous_answer(client: httpx.Client) -> None:
    first = observe(client, text="one")
    second = observe(client, text="two", reward=0.5)
    bot_answers = [u for u in stored_turn(client, second)["utterances"] if u["speaker"] == "bot"]
    assert bot_answers[0]["utt_id"] == first["utt_id"]
    assert [b["rating"] for b in bot_answers] == [0.5, None]


def test_an_image_reaches_annotators(client: httpx.Client) -> None:
    data = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    act = observe(client, text="what is this?", image=data)
    human = stored_turn(client, act)["utterances"][0]
    assert human["annotations"]["vision"] == {"image": data[:40]}
    url_act = observe(client, text="and this?", image="https://example.org/cat.png")
    assert stored_turn(client, url_act)["utterances"][-2]["annotations"]["vision"] == {
        "image": "https://example.org/cat.png"
    }


@pytest.mark.store_agnostic
def test_bad_images_are_refused_with_what_to_do(shared_client: httpx.Client) -> None:
    big = shared_client.post(
        "/api/v1/chat", json={"user_id": "ann", "text": "x", "image": "A" * 5000}
    )
    assert big.status_code == 413
    assert "MAX_IMAGE_BYTES" in big.json()["message"]
    bad = shared_client.post("/api/v1/chat", json={"user_id": "ann", "text": "x", "image": "%%%"})
    assert bad.status_code == 422
    assert "http(s) URL or base64" in bad.json()["message"]


@pytest.mark.store_agnostic
def test_bad_observations_are_named(shared_client: httpx.Client) -> None:
    response = shared_client.post(
        "/api/v1/chat",
        json={"user_id": "ann", "text": "x", "labels": "sheep", "episode_done": "maybe"},
    )
    assert response.status_code == 422
    message = response.json()["message"]
    assert "labels: Input should be a valid list" in message
    assert "episode_done: Input should be a valid boolean" in message
