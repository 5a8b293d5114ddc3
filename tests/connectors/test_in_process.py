"""Services called in the agent's process (``"connector": {"module": ...}``): they answer
as they would over HTTP, cannot reach the agent's state through what they are shown, fail
alone, stream, and have their lifespan held open by the agent."""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from agent.api.app import create_app
from agent.connectors.http import HttpConnector, make_transport
from agent.connectors.in_process import InProcessConnector, load_service
from agent.pipeline.kind import ChorusKind
from agent.sdk.models import DialogView
from agent.settings import Settings
from agent.state.storage_limits import StorageLimits
from agent.turn.config import PipelineConfigError
from annotators.intents.app import service as intents
from skills.smalltalk.app import service as smalltalk
from tests.conftest import CLIENT_TIMEOUT, AgentFactory, agents
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
        transport = make_transport()
        try:
            remote = HttpConnector(service.name, f"{server.url}/respond", transport, 10.0)
            over_http = await remote.call([shown])
        finally:
            await transport.aclose()
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
    transport = make_transport()
    try:
        async with AsyncExitStack() as closing:
            with pytest.raises(PipelineConfigError) as refused:
                await kind.executor(transport, closing, channel_type="http", limits=StorageLimits())
    finally:
        await transport.aclose()
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


def test_an_in_process_handler_that_asks_to_exit_fails_only_its_own_call(
    agent: AgentFactory,
) -> None:
    """``sys.exit()`` or ``KeyboardInterrupt`` in a handler (async, sync in its thread, or
    streaming) costs its service's output, as an exception would: the agent answers this
    user and the next, and /ping answers (before, the first such call ended the agent)."""
    pipeline = skills(
        exiter="tests.support.in_process:exiter",
        interrupter="tests.support.in_process:interrupter",
        sync_exiter="tests.support.in_process:sync_exiter",
        stream_exiter="tests.support.in_process:stream_exiter",
        echo="tests.support.in_process:make_echo",
    )
    pipeline["services"]["skills"]["stream_exiter"]["stream"] = True
    client = agent(pipeline)
    for user in ["ann", "bob"]:
        answer = client.post("/", json={"user_id": user, "payload": "Hi"}).json()
        assert (answer["active_skill"], answer["response"]) == ("echo", "echo: Hi"), answer
    assert client.get("/ping").status_code == 200
    (dialog,) = client.get("/api/user/bob").json()
    errors = {e["service"]: (e["kind"], e["message"]) for e in dialog["utterances"][0]["errors"]}
    ended = "which would have ended the agent"
    assert errors == {
        "exiter": ("bad_response", f"its handler raised SystemExit(3), {ended}"),
        "interrupter": ("bad_response", f"its handler raised KeyboardInterrupt(), {ended}"),
        "sync_exiter": ("bad_response", f"its handler raised SystemExit('bye'), {ended}"),
        "stream_exiter": ("bad_response", f"its handler raised SystemExit(4), {ended}"),
    }


def test_an_in_process_handler_that_blocks_the_loop_is_named_refused_then_not_called(
    agent: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """An async handler that blocks past its timeout holds every user meanwhile: its late
    answer is not used (it was recorded ``ok`` and won the turn), the log names it while it
    blocks, and once it has blocked again it is not called until its circuit's trial."""
    in_process.CALLS.clear()
    pipeline = skills(
        blocker="tests.support.in_process:blocker", echo="tests.support.in_process:make_echo"
    )
    pipeline["services"]["skills"]["blocker"]["connector"]["timeout"] = 0.3
    client = agent(pipeline)
    with caplog.at_level(logging.WARNING, logger="chorus.connectors"):
        for user in ["ann", "bob", "cid"]:
            answer = client.post("/", json={"user_id": user, "payload": "Hi"}).json()
            assert (answer["active_skill"], answer["response"]) == ("echo", "echo: Hi"), answer
    assert in_process.CALLS["blocker"] == 2
    failures = []
    for user in ["ann", "bob", "cid"]:
        (dialog,) = client.get(f"/api/user/{user}").json()
        (error,) = dialog["utterances"][0]["errors"]
        (call,) = [c for c in dialog["utterances"][0]["trace"] if c["service"] == "blocker"]
        failures.append((error["service"], error["kind"], call["outcome"], error["message"]))
    for blocked in failures[:2]:
        assert blocked[:3] == ("blocker", "timeout", "timeout")
        assert blocked[3].startswith("held the event loop for ")
        assert blocked[3].endswith(
            "past its 0.3s timeout (a blocking call in an async handler): its answer is not used"
        )
    assert failures[2][:3] == ("blocker", "unavailable", "error")
    assert failures[2][3].startswith("circuit open")
    named = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("in-process service blocker has held the event loop for")
    ]
    assert len(named) == 2, caplog.text
    assert "service blocker held the event loop again: circuit open" in caplog.text


def test_a_hung_sync_handler_holds_at_most_its_threads(agent: AgentFactory) -> None:
    """A sync handler given up at its timeout runs on in its thread: once the service's
    ``threads`` are all taken so, its calls fail at once as unavailable, saying why, instead
    of each starting one more thread (400 turns had made 410 threads, and 4 GB)."""
    in_process.RELEASE.clear()
    pipeline = skills(
        hanger="tests.support.in_process:hanger", echo="tests.support.in_process:make_echo"
    )
    pipeline["services"]["skills"]["hanger"]["connector"].update(timeout=0.3, threads=2)
    client = agent(pipeline)
    try:
        users = [f"user{n}" for n in range(5)]
        for user in users:
            answer = client.post("/", json={"user_id": user, "payload": "Hi"}).json()
            assert answer["response"] == "echo: Hi", answer
        assert in_process.HANGING["hanger"] == 2
        kinds = []
        for user in users:
            (dialog,) = client.get(f"/api/user/{user}").json()
            (error,) = dialog["utterances"][0]["errors"]
            kinds.append((error["service"], error["kind"]))
        assert kinds == [("hanger", "timeout")] * 2 + [("hanger", "unavailable")] * 3
        assert error["message"].startswith("its 2 threads are all still running earlier calls")
    finally:
        in_process.RELEASE.set()


def test_a_lifespan_that_never_opens_costs_only_its_service_s_calls(
    agent: AgentFactory,
) -> None:
    """The agent waits for an in-process lifespan at most its service's timeout, then
    serves: the service's calls fail as unavailable, the others answer (before, the agent
    waited for it for good and never answered /ping)."""
    pipeline = skills(
        stuck="tests.support.in_process:stuck", echo="tests.support.in_process:make_echo"
    )
    pipeline["services"]["skills"]["stuck"]["connector"]["timeout"] = 0.5
    client = agent(pipeline)
    assert client.get("/ping").status_code == 200
    answer = client.post("/", json={"user_id": "ann", "payload": "Hi"}).json()
    assert (answer["active_skill"], answer["response"]) == ("echo", "echo: Hi")
    (dialog,) = client.get("/api/user/ann").json()
    (error,) = dialog["utterances"][0]["errors"]
    assert (error["service"], error["kind"]) == ("stuck", "unavailable")
    assert error["message"].startswith("its lifespan is still opening")


def test_an_in_process_flood_is_refused_as_it_is_over_http(agent: AgentFactory) -> None:
    """A streaming skill's flood of one-character pieces (2.24 MB as lines) fails as it does
    over HTTP: over the 2 MB an answer may be (in the agent it had been taken whole)."""
    failures = []
    with serving(in_process.flood.app) as server:
        for user, connector in [
            ("over_http", {"url": f"{server.url}/respond"}),
            ("in_the_agent", {"module": "tests.support.in_process:flood"}),
        ]:
            pipeline = skills(echo="tests.support.in_process:make_echo")
            pipeline["services"]["skills"]["flood"] = {
                "connector": {**connector, "timeout": 60.0},
                "stream": True,
            }
            client = agent(pipeline)
            answer = client.post("/", json={"user_id": user, "payload": "Hi"}).json()
            assert answer["response"] == "echo: Hi"
            (dialog,) = client.get(f"/api/user/{user}").json()
            (error,) = dialog["utterances"][0]["errors"]
            failures.append((error["service"], error["kind"], error["message"]))
    over_http, in_the_agent = failures
    assert (
        in_the_agent
        == over_http
        == (
            "flood",
            "bad_response",
            "answer is over the 2097152 bytes limit",
        )
    )


def test_ping_answers_while_an_in_process_skill_streams_without_awaiting(
    agent: AgentFactory,
) -> None:
    """An in-process stream hands the loop back every few pieces, as the HTTP connector's
    reader does: /ping answers while a skill that never awaits is still streaming (before,
    /ping waited for the stream's end)."""
    for event in [in_process.TRICKLING, in_process.PINGED]:
        event.clear()
    in_process.TRICKLE_SAW_PING.clear()
    pipeline = skills(trickle="tests.support.in_process:trickle")
    pipeline["services"]["skills"]["trickle"]["stream"] = True
    client = agent(pipeline)
    with ThreadPoolExecutor(1) as pool:
        turn = pool.submit(client.post, "/", json={"user_id": "ann", "payload": "Hi"})
        assert in_process.TRICKLING.wait(CLIENT_TIMEOUT), "the skill never started"
        assert client.get("/ping").status_code == 200
        in_process.PINGED.set()
        assert turn.result().status_code == 200
    assert in_process.TRICKLE_SAW_PING == [True]


def test_an_in_process_answer_over_the_bound_is_refused_as_over_http(
    agent: AgentFactory,
) -> None:
    """50,000 hypotheses (3.6 MB of JSON) fail as an answer over the 2 MB bound, as over
    HTTP; in the agent they had been copied whole, then refused by the storage bounds."""
    failures = []
    with serving(in_process.crowd.app) as server:
        for user, connector in [
            ("over_http", {"url": f"{server.url}/respond"}),
            ("in_the_agent", {"module": "tests.support.in_process:crowd"}),
        ]:
            pipeline = skills(echo="tests.support.in_process:make_echo")
            pipeline["services"]["skills"]["crowd"] = {"connector": {**connector, "timeout": 60.0}}
            client = agent(pipeline)
            answer = client.post("/", json={"user_id": user, "payload": "Hi"}).json()
            assert answer["response"] == "echo: Hi"
            (dialog,) = client.get(f"/api/user/{user}").json()
            (error,) = dialog["utterances"][0]["errors"]
            failures.append((error["service"], error["kind"], error["message"]))
    for service, kind, message in failures:
        assert (service, kind) == ("crowd", "bad_response")
        assert re.fullmatch(r"answer of \d+ bytes is over the 2097152 limit", message), message
