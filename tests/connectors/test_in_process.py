"""Services called in the agent's process (``"connector": {"module": ...}``): they answer
as they would over HTTP, cannot reach the agent's state through what they are shown, fail
alone, stream, and have their lifespan held open by the agent."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from agent.api.app import create_app
from agent.connectors.http import HttpConnector, make_http_client
from agent.connectors.in_process import InProcessConnector, load_service
from agent.connectors.transport import AiohttpTransport
from agent.pipeline.config import PipelineConfigError
from agent.pipeline.kind import ChorusKind
from agent.sdk.models import DialogView
from agent.settings import Settings
from agent.state.storage_limits import StorageLimits
from annotators.intents.app import service as intents
from skills.smalltalk.app import service as smalltalk
from tests.conftest import AgentFactory, agents
from tests.support import in_process
from tests.support.events import follow
from tests.support.servers import serving
from tests.support.views import view

ROOT = Path(__file__).resolve().parents[2]


def skills(**modules: str) -> dict[str, Any]:
    """A pipeline of skills, each named by its module."""
    return {
        "services": {
            "skills": {
                name: {"connector": {"module": module, "timeout": 10.0}}
                for name, module in modules.items()
            }
        }
    }


@pytest.mark.parametrize("service", [intents, smalltalk], ids=["intents", "smalltalk"])
async def test_a_service_answers_in_process_what_it_answers_over_http(service: Any) -> None:
    shown = DialogView.model_validate(
        view("Hello!", "Hi! What's your name?", "Tell me a joke", human_attributes={"name": "Ann"})
    )
    with serving(service.app) as server:
        client = make_http_client()
        try:
            remote = HttpConnector(
                service.name, f"{server.url}/respond", AiohttpTransport(client), 10.0
            )
            over_http = await remote.call([shown])
        finally:
            await client.close()
    in_the_agent = await InProcessConnector(service.name, service).call([shown])
    assert in_the_agent == over_http
    assert in_the_agent != [[]], "the service answered nothing: the comparison says little"


async def test_what_a_service_changes_in_its_view_never_reaches_the_turn() -> None:
    shown = DialogView.model_validate(view("Hello!", human_attributes={"name": "Ann"}))
    before = shown.model_dump()
    connector = InProcessConnector("meddler", in_process.meddler)
    (first,) = await connector.call([shown])
    (second,) = await connector.call([shown])
    assert shown.model_dump() == before
    assert (
        first
        == second
        == [
            {
                "text": "found ['name']",
                "confidence": 0.9,
                "human_attributes": {},
                "bot_attributes": {},
            }
        ]
    )


def test_the_stored_dialog_keeps_nothing_a_service_changed_in_its_view(
    agent: AgentFactory,
) -> None:
    client = agent(skills(meddler="tests.support.in_process:meddler"))
    for text in ["Hello!", "How are you?"]:
        answer = client.post("/", json={"user_id": "ann", "payload": text}).json()
        assert answer["response"] == "found []", answer
    (dialog,) = client.get("/api/user/ann").json()
    assert [u["text"] for u in dialog["utterances"]] == [
        "Hello!",
        "found []",
        "How are you?",
        "found []",
    ]
    assert "meddled" not in str(dialog)


def test_a_failing_in_process_service_costs_only_its_own_output(agent: AgentFactory) -> None:
    client = agent(
        skills(
            refuser="tests.support.in_process:refuser",
            crasher="tests.support.in_process:crasher",
            bad_shape="tests.support.in_process:bad_shape",
            echo="tests.support.in_process:make_echo",
        )
    )
    answer = client.post("/", json={"user_id": "ann", "payload": "Hi"}).json()
    assert (answer["active_skill"], answer["response"]) == ("echo", "echo: Hi")
    (dialog,) = client.get("/api/user/ann").json()
    errors = {e["service"]: e for e in dialog["utterances"][0]["errors"]}
    assert errors["refuser"]["kind"] == "bad_status"
    assert "HTTP 503" in errors["refuser"]["message"]
    assert "no model loaded" in errors["refuser"]["message"]
    assert errors["crasher"]["kind"] == "bad_response"
    assert errors["crasher"]["message"] == "RuntimeError: a bug in the skill"
    assert errors["bad_shape"]["kind"] == "bad_response"
    assert "wrong" in errors["bad_shape"]["message"]  # the handler is named
    assert set(errors) == {"refuser", "crasher", "bad_shape"}


def test_an_in_process_skill_streams_its_tokens(agent: AgentFactory) -> None:
    pipeline = skills(streamer="tests.support.in_process:streamer")
    pipeline["services"]["skills"]["streamer"]["stream"] = True
    client = agent(pipeline)
    response, events = follow(client, "/", {"user_id": "ann", "payload": "Count"})
    assert response.status_code == 200
    tokens = [data["text"] for kind, data in events if kind == "token"]
    assert tokens == ["one ", "two ", "three"]
    assert events[-1][0] == "answer" and events[-1][1]["response"] == "one two three"
    (dialog,) = client.get("/api/user/ann").json()
    assert dialog["utterances"][1]["text"] == "one two three"


def test_an_in_process_service_s_lifespan_is_open_while_the_agent_runs(
    tmp_path: Path, db_url: str
) -> None:
    in_process.LIFESPAN_EVENTS.clear()
    with agents(tmp_path, db_url) as start:
        client = start(skills(lifespan="tests.support.in_process:lifespan"))
        assert in_process.LIFESPAN_EVENTS == ["open"]  # before the first turn
        answer = client.post("/", json={"user_id": "ann", "payload": "Hi"}).json()
        assert answer["response"] == "events: open"
    assert in_process.LIFESPAN_EVENTS == ["open", "close"]


@pytest.mark.parametrize(
    ("group", "module", "message"),
    [
        ("skills", "tests.support.nowhere", "cannot import 'tests.support.nowhere'"),
        ("skills", "tests.support.in_process:not_a_service", "is a str, not a chorus Service"),
        ("skills", "tests.support.in_process:missing", "is nothing, not a chorus Service"),
        (
            "annotators",
            "tests.support.in_process:meddler",
            "is a skill service, but the pipeline lists it under annotators",
        ),
    ],
)
def test_a_module_that_gives_no_service_stops_the_agent_naming_its_entry(
    tmp_path: Path, group: str, module: str, message: str
) -> None:
    path = tmp_path / "pipeline.json"
    entry = {"connector": {"module": module}}
    path.write_text(json.dumps({"services": {group: {"x": entry}}}))
    with pytest.raises(PipelineConfigError) as refused:
        create_app(Settings(db_url=f"sqlite:///{tmp_path}/x.db", pipeline=path))
    assert f"services.{group}.x.connector.module: " in str(refused.value)
    assert message in str(refused.value)


async def test_a_factory_that_makes_no_service_stops_the_agent_as_it_starts() -> None:
    kind = ChorusKind.load(skills(x="tests.support.in_process:make_nothing"), "pipeline.json")
    client = make_http_client()
    try:
        async with AsyncExitStack() as closing:
            with pytest.raises(PipelineConfigError) as refused:
                await kind.executor(client, closing, channel_type="http", limits=StorageLimits())
    finally:
        await client.close()
    assert str(refused.value) == (
        "services.skills.x.connector.module: "
        "tests.support.in_process:make_nothing made a NoneType, not a chorus Service"
    )


def test_a_factory_is_called_for_each_agent() -> None:
    first = load_service("tests.support.in_process:make_echo", "skills")
    second = load_service("tests.support.in_process:make_echo", "skills")
    assert first is not second and first.name == second.name == "echo"


def test_chorus_run_starts_no_process_for_an_in_process_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
    shipped = json.loads((ROOT / "pipeline.json").read_text())
    modules = {
        name
        for entries in shipped["services"].values()
        for name, entry in entries.items()
        if "module" in entry["connector"]
    }
    assert "intents" in modules and "llm" in modules
    local = ChorusKind.load(shipped, "pipeline.json").local_services(ROOT)
    assert not {service.name for service in local.startable} & modules
    assert local.elsewhere == []
