"""A turn's trace across real HTTP: the agent and SDK services, each exporting to
OpenTelemetry's in-memory exporter, must tell one story under one trace id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id

from agent.api.app import create_app
from agent.sdk import DialogView, Service, SkillHypothesis
from agent.settings import Settings
from tests.conftest import service_entry
from tests.support.servers import serving
from tests.support.spans import SpanRecorder, named, one

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
API_KEY = "k" * 32


def sdk_services(recorder: SpanRecorder) -> dict[str, Service]:
    tokens = Service("tokens", tracer_provider=recorder.provider)
    greeting = Service("greeting", tracer_provider=recorder.provider)
    broken = Service("broken", tracer_provider=recorder.provider)

    @tokens.annotator
    def count(dialog: DialogView) -> dict[str, int]:
        return {"tokens": len(dialog.human_utterance.text.split())}

    @greeting.skill
    def greet(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(text="Hello!", confidence=0.9)

    @broken.skill
    def crash(dialog: DialogView) -> SkillHypothesis:
        raise RuntimeError("this skill is broken")

    return {"tokens": tokens, "greeting": greeting, "broken": broken}


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[httpx.Client, SpanRecorder, SpanRecorder]]:
    """The agent and three SDK services on 127.0.0.1, each side with its own recorder."""
    agent_spans, service_spans = SpanRecorder("chorus-agent"), SpanRecorder("services")
    with ExitStack() as stack:
        urls = {
            name: stack.enter_context(serving(service.app)).url
            for name, service in sdk_services(service_spans).items()
        }
        pipeline = tmp_path / "pipeline.json"
        pipeline.write_text(
            json.dumps(
                {
                    "services": {
                        "annotators": {"tokens": service_entry(urls["tokens"])},
                        "skills": {
                            "greeting": service_entry(urls["greeting"]),
                            "broken": service_entry(urls["broken"]),
                        },
                        "response_selectors": {
                            "pick": {"connector": {"builtin": "highest_confidence"}}
                        },
                    }
                }
            )
        )
        settings = Settings(
            db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline, api_key=API_KEY
        )
        agent = stack.enter_context(
            serving(create_app(settings, tracer_provider=agent_spans.provider))
        )
        client = stack.enter_context(httpx.Client(base_url=agent.url, timeout=30))
        yield client, agent_spans, service_spans


def test_a_turn_is_one_trace_from_the_caller_through_the_agent_into_its_services(
    traced: tuple[httpx.Client, SpanRecorder, SpanRecorder],
) -> None:
    client, agent_spans, service_spans = traced
    reply = client.post(
        "/",
        json={"user_id": "ann@example.org", "payload": "hi there"},
        headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["response"] == "Hello!"

    spans = agent_spans.wait_for(lambda s: bool(named(s, "POST /")))
    remote = service_spans.wait_for(lambda s: len(named(s, "POST /respond")) == 3)
    assert {format_trace_id(s.context.trace_id) for s in spans + remote} == {CALLER_TRACE}

    request = one(spans, "POST /")
    assert request.kind == SpanKind.SERVER
    assert format_span_id(request.parent.span_id) == CALLER_SPAN
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["http.route"] == "/"

    turn = one(spans, "chorus.turn")
    assert turn.parent.span_id == request.context.span_id
    dialog = client.get(
        f"/api/dialogs/{reply.json()['dialog_id']}", headers={"X-API-Key": API_KEY}
    ).json()
    human = dialog["utterances"][0]
    assert turn.attributes["chorus.dialog_id"] == reply.json()["dialog_id"]
    assert turn.attributes["chorus.utt_id"] == human["utt_id"]
    assert turn.attributes["chorus.bot_utt_id"] == reply.json()["utt_id"]
    assert turn.attributes["chorus.active_skill"] == "greeting"
    assert turn.attributes["chorus.outcome"] == "answered"
    assert turn.attributes["chorus.service_errors"] == 1
    user_hash = turn.attributes["chorus.user_id_hash"]
    assert isinstance(user_hash, str) and "ann" not in user_hash
    assert all("ann@example.org" not in str(s.attributes) for s in spans)

    calls = {s.attributes["chorus.service"]: s for s in spans if s.name.startswith("call ")}
    assert set(calls) == {"tokens", "greeting", "broken", "pick"}
    for name, call in calls.items():
        assert call.kind == SpanKind.CLIENT and call.parent.span_id == turn.context.span_id
        assert call.attributes["chorus.batch_size"] == 1
        role = (
            "response_selectors"
            if name == "pick"
            else ("annotators" if name == "tokens" else "skills")
        )
        assert call.attributes["chorus.role"] == role
        assert "chorus.group" not in call.attributes
        assert "chorus.dream_group" not in call.attributes  # a Chorus pipeline's call
    assert calls["greeting"].attributes["chorus.outcome"] == "ok"
    assert "error.type" not in calls["greeting"].attributes

    # Each service's server span is the child of the agent's span for that call.
    by_parent = {s.parent.span_id: s for s in remote}
    for name in ("tokens", "greeting", "broken"):
        served = by_parent[calls[name].context.span_id]
        assert served.resource.attributes["service.name"] == "services"
        assert served.attributes["chorus.batch_size"] == 1

    stored = {
        s.name
        for s in spans
        if s.name.startswith("store.") and s.parent.span_id == turn.context.span_id
    }
    assert {"store.open_turn", "store.add_utterance", "store.finish_turn"} <= stored


def test_a_failing_service_call_span_says_what_went_wrong(
    traced: tuple[httpx.Client, SpanRecorder, SpanRecorder],
) -> None:
    client, agent_spans, service_spans = traced
    assert client.post("/", json={"user_id": "bob", "payload": "hi"}).status_code == 200
    spans = agent_spans.wait_for(lambda s: bool(named(s, "POST /")))
    broken = one(spans, "call broken")
    assert broken.attributes["chorus.outcome"] == "error"
    assert broken.attributes["error.type"] == "bad_status"
    assert broken.status.status_code == StatusCode.ERROR
    assert "500" in (broken.status.description or "")
    remote = service_spans.wait_for(lambda s: len(named(s, "POST /respond")) == 3)
    served = next(s for s in remote if s.parent.span_id == broken.context.span_id)
    assert served.attributes["http.response.status_code"] == 500
    assert served.status.status_code == StatusCode.ERROR
    # Without a caller's traceparent the agent starts the trace.
    assert one(spans, "POST /").parent is None


def user_hashes(tmp_path: Path, user_ids: list[str], **settings: Any) -> list[str]:
    """The ``chorus.user_id_hash`` of one turn per user id, through a fresh agent."""
    from skills.greeting.app import app as greeting_app

    spans = SpanRecorder("chorus-agent")
    tmp_path.mkdir()
    with ExitStack() as stack:
        pipeline = tmp_path / "pipeline.json"
        url = stack.enter_context(serving(greeting_app)).url
        pipeline.write_text(json.dumps({"services": {"skills": {"greeting": service_entry(url)}}}))
        app = create_app(
            Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline, **settings),
            tracer_provider=spans.provider,
        )
        client = stack.enter_context(httpx.Client(base_url=stack.enter_context(serving(app)).url))
        for user_id in user_ids:
            client.post("/", json={"user_id": user_id, "payload": "hi"}).raise_for_status()
        turns = spans.wait_for(lambda s: len(named(s, "chorus.turn")) == len(user_ids))
    return [str(turn.attributes["chorus.user_id_hash"]) for turn in named(turns, "chorus.turn")]


def test_the_user_id_hash_is_keyed_so_a_guessable_id_is_not_recovered(tmp_path: Path) -> None:
    """A numeric id (a Telegram user's) hashed without a secret is found by hashing every
    number; keyed with CHORUS_TRACE_ID_KEY it is the id's HMAC, the same for each turn of
    the user; without the setting, a key made for the process."""
    import hashlib
    import hmac

    telegram_id = "123456789"
    plain = hashlib.sha256(telegram_id.encode()).hexdigest()[:16]
    key = "trace-id-key-" + "x" * 20
    keyed = user_hashes(tmp_path / "keyed", [telegram_id, telegram_id], trace_id_key=key)
    expected = hmac.new(key.encode(), telegram_id.encode(), hashlib.sha256).hexdigest()[:16]
    assert keyed == [expected, expected]
    unkeyed = user_hashes(tmp_path / "unkeyed", [telegram_id, telegram_id])
    assert unkeyed[0] == unkeyed[1]
    assert plain not in {*keyed, *unkeyed} and unkeyed[0] != expected
    with pytest.raises(ValueError, match="at least 16 characters"):
        Settings(trace_id_key="short")


def test_probes_are_not_traced(traced: tuple[httpx.Client, SpanRecorder, SpanRecorder]) -> None:
    client, agent_spans, _ = traced
    assert client.get("/ping").status_code == 200
    assert client.get("/ready").status_code == 200
    assert client.get("/api/pipeline", headers={"X-API-Key": API_KEY}).status_code == 200
    spans = agent_spans.wait_for(lambda s: bool(named(s, "GET /api/pipeline")))
    assert [s.name for s in spans] == ["GET /api/pipeline"]


def test_a_trace_the_caller_did_not_sample_is_recorded_nowhere(
    traced: tuple[httpx.Client, SpanRecorder, SpanRecorder],
) -> None:
    client, agent_spans, service_spans = traced
    unsampled = "1" * 32
    reply = client.post(
        "/",
        json={"user_id": "cy", "payload": "hi"},
        headers={"traceparent": f"00-{unsampled}-{CALLER_SPAN}-00"},
    )
    assert reply.status_code == 200, reply.text
    assert (
        client.post(
            "/",
            json={"user_id": "cy", "payload": "hi again"},
            headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
        ).status_code
        == 200
    )
    spans = agent_spans.wait_for(lambda s: bool(named(s, "POST /")))
    remote = service_spans.wait_for(lambda s: len(named(s, "POST /respond")) == 3)
    assert {format_trace_id(s.context.trace_id) for s in spans + remote} == {CALLER_TRACE}
    assert len(named(spans, "chorus.turn")) == 1


def test_a_dp_agent_pipeline_turn_has_a_span_per_service_call(tmp_path: Path) -> None:
    from tests.dream import services as dream

    agent_spans = SpanRecorder("chorus-agent")
    with ExitStack() as stack:
        eliza = stack.enter_context(serving(dream.eliza())).url
        failing = stack.enter_context(serving(dream.failing())).url
        pipeline = tmp_path / "pipeline_conf.json"
        formatters = "tests.dream.formatters"

        def skill(url: str) -> dict[str, Any]:
            return {
                "connector": {"protocol": "http", "url": f"{url}/respond"},
                "dialog_formatter": f"{formatters}:eliza_like",
                "response_formatter": f"{formatters}:skill_pair",
                "state_manager_method": "add_hypothesis",
            }

        pipeline.write_text(
            json.dumps({"services": {"skills": {"eliza": skill(eliza), "down": skill(failing)}}})
        )
        settings = Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline)
        agent = stack.enter_context(
            serving(create_app(settings, tracer_provider=agent_spans.provider))
        )
        client = stack.enter_context(httpx.Client(base_url=agent.url, timeout=30))
        assert client.post("/", json={"user_id": "ann", "payload": "hi"}).status_code == 200
        spans = agent_spans.wait_for(lambda s: bool(named(s, "POST /")))
    turn = one(spans, "chorus.turn")
    calls = {s.name: s for s in spans if s.name.startswith("call ")}
    assert set(calls) == {"call skills.eliza", "call skills.down"}
    assert all(s.parent.span_id == turn.context.span_id for s in calls.values())
    assert calls["call skills.eliza"].attributes["chorus.outcome"] == "ok"
    assert calls["call skills.down"].attributes["error.type"] == "bad_status"
    for call in calls.values():  # the role, and dp-agent's group it is filed under
        assert (call.attributes["chorus.role"], call.attributes["chorus.dream_group"]) == (
            "skills",
            "skills",
        )
