"""`GET /metrics` counts turns and service failures as they happened."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from prometheus_client.parser import text_string_to_metric_families

from agent.state.storage_limits import StorageLimits
from tests.conftest import AgentFactory, service_entry
from tests.support.ports import free_port
from tests.support.services import fixed_skill, raw_app


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_turns_errors_timeouts_and_fallbacks(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "skills": {
                    "good": service_entry(services(fixed_skill("good", "fine", 0.5)).url),
                    "garbage": service_entry(services(raw_app(b"not json")).url),
                    "slow": service_entry(
                        services(fixed_skill("slow", "late", 0.9, delay=1.0)).url, timeout=0.2
                    ),
                }
            }
        }
    )
    for _ in range(3):
        assert client.post("/", json={"user_id": "u", "payload": "hi"}).status_code == 200
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    values = samples(response.text)
    assert values[("chorus_turns_total", ())] == 3
    assert values[("chorus_turn_seconds_count", ())] == 3
    assert values[("chorus_turns_in_flight", ())] == 0
    assert (
        values[("chorus_service_errors_total", (("kind", "bad_response"), ("service", "garbage")))]
        == 3
    )
    assert values[("chorus_service_errors_total", (("kind", "timeout"), ("service", "slow")))] == 3
    assert values[("chorus_service_timeouts_total", (("service", "slow"),))] == 3
    assert (
        values[("chorus_service_call_seconds_count", (("role", "skills"), ("service", "good")))]
        == 3
    )
    assert values[("chorus_fallback_answers_total", ())] == 0


def test_fallback_answers_are_counted(services: Any, agent: AgentFactory) -> None:
    client = agent(
        {"services": {"skills": {"down": service_entry(f"http://127.0.0.1:{free_port()}")}}}
    )
    client.post("/", json={"user_id": "u", "payload": "hi"})
    values = samples(client.get("/metrics").text)
    assert values[("chorus_fallback_answers_total", ())] == 1
    assert (
        values[("chorus_service_errors_total", (("kind", "unavailable"), ("service", "down")))] == 1
    )


def inventing_selector() -> FastAPI:
    """A dp-agent response selector that credits its answer to a new skill name each turn,
    with human attributes over the agent's bound, so each turn records a refusal under
    that name."""
    app = FastAPI()
    turns = iter(range(1_000_000))

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        body = await request.json()
        return [
            [f"invented-{next(turns)}", "an answer", 0.9, {"a": 1, "b": 2}, {}]
            for _ in body["dialogs"]
        ]

    return app


def test_service_labels_are_the_pipelines_whatever_names_a_selector_invents(
    services: Any, agent: AgentFactory
) -> None:
    from tests.dream import services as dream
    from tests.dream.test_dream_behaviour import selector, skill

    client = agent(
        {
            "services": {
                "skills": {"eliza": skill(services(dream.eliza()).url)},
                "response_selector": selector(services(inventing_selector()).url),
            }
        },
        limits=StorageLimits(max_attribute_keys=1),
    )
    for turn in range(20):
        reply = client.post("/", json={"user_id": "u", "payload": f"hi {turn}"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["active_skill"] == f"invented-{turn}"
    dialog = client.get(f"/api/dialogs/{reply.json()['dialog_id']}?view=chorus").json()
    assert dialog["utterances"][-2]["errors"][0]["service"] == "invented-19"  # kept as sent
    found = samples(client.get("/metrics").text)
    errors = {
        dict(labels)["service"]: value
        for (name, labels), value in found.items()
        if name == "chorus_service_errors_total"
    }
    assert errors == {"(unknown)": 20}
    series = {labels for (name, labels) in found if name.startswith("chorus_service_")}
    assert len(series) < 40, series
