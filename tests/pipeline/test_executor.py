"""The executor: order, concurrency, slots, selection, batching.

Tests about time and order call real HTTP services; those about what the services answer
call them in memory (:class:`~agent.connectors.transport.MockTransport`): each service is a
function from the request to the response. Timing assertions use the executor's own trace
(start offsets and durations it recorded), never the wall clock of the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from agent.connectors.http import make_transport
from agent.connectors.transport import Handler, MockTransport, Request, Response, Transport
from agent.pipeline.config import parse_pipeline_config
from agent.pipeline.connectors import make_batchers
from agent.pipeline.executor import Executor
from agent.sdk.models import DialogView
from agent.state.models import FALLBACK_SKILL, Bot, Human, HumanUtterance, ServiceCall
from agent.turn.value import Turn, TurnResult
from tests.conftest import service_entry
from tests.support.servers import ServerThread
from tests.support.services import fixed_skill, length_annotator

Services = Callable[[Any], ServerThread]


@pytest.fixture
async def client() -> AsyncIterator[Transport]:
    transport = make_transport()
    yield transport
    await transport.aclose()


def executor(client: Transport, services: dict[str, Any], **top: Any) -> Executor:
    from agent.pipeline.graph import build_pipeline

    pipeline = build_pipeline(parse_pipeline_config({"services": services, **top}))
    return Executor(pipeline, make_batchers(pipeline, client))


Served = Handler | tuple[Handler, dict[str, Any]]


def in_memory(services: dict[str, dict[str, Served]], **top: Any) -> Executor:
    """An executor whose services are the handlers, each at ``http://<its name>.test``; a
    ``(handler, entry)`` pair adds ``entry``'s keys to the service's entry (``connector``'s
    to its connector)."""
    from agent.pipeline.graph import build_pipeline

    routes: dict[str, Handler] = {}
    config: dict[str, dict[str, Any]] = {}
    for role, served in services.items():
        for name, service in served.items():
            handler, extra = service if isinstance(service, tuple) else (service, {})
            routes[name] = handler
            entry = service_entry(f"http://{name}.test", **extra)
            entry["connector"] = {
                **service_entry(f"http://{name}.test")["connector"],
                **extra.get("connector", {}),
            }
            config.setdefault(role, {})[name] = entry

    def route(request: Request) -> Response | Awaitable[Response]:
        return routes[str(urlsplit(request.url).hostname).removesuffix(".test")](request)

    pipeline = build_pipeline(parse_pipeline_config({"services": config, **top}))
    return Executor(pipeline, make_batchers(pipeline, MockTransport(route)))


def answering(each: Callable[[DialogView], Any]) -> Handler:
    """A service that answers each dialog of a request with ``each(dialog)``."""

    def handle(request: Request) -> Response:
        dialogs = [DialogView.model_validate(d) for d in request.json()["dialogs"]]
        return Response.of_json([each(dialog) for dialog in dialogs])

    return handle


def saying(text: str, confidence: float, **attributes: Any) -> Handler:
    """A skill that always answers ``text``."""
    hypothesis = {"text": text, "confidence": confidence, "human_attributes": attributes}
    return answering(lambda dialog: [hypothesis])


def telling(answer: Any, status: int = 200) -> Handler:
    """A service that answers exactly ``answer`` as JSON, whatever it is asked."""
    return lambda request: Response.of_json(answer, status)


def turn(text: str = "hello") -> Turn:
    return Turn("d1", Human(user_external_id="u1"), Bot(), [], HumanUtterance(text=text))


def calls(result: TurnResult) -> dict[str, ServiceCall]:
    return {c.service: c for c in result.utterance.trace}


async def test_independent_skills_overlap(services: Services, client: Transport) -> None:
    run = executor(
        client,
        {
            "skills": {
                "a": service_entry(services(fixed_skill("a", "A", 0.5, delay=0.2)).url),
                "b": service_entry(services(fixed_skill("b", "B", 0.6, delay=0.2)).url),
            }
        },
    )
    result = await run.run(turn())
    a, b = calls(result)["a"], calls(result)["b"]
    assert a.duration >= 0.2 and b.duration >= 0.2
    assert b.start < a.start + a.duration and a.start < b.start + b.duration  # overlapped
    assert result.bot_utterance.text == "B"


async def test_groups_and_previous_services_run_in_order(
    services: Services, client: Transport
) -> None:
    run = executor(
        client,
        {
            "annotators": {
                "first": service_entry(services(length_annotator("first", delay=0.05)).url),
                "second": service_entry(
                    services(length_annotator("second")).url, previous_services=["first"]
                ),
            },
            "skills": {"s": service_entry(services(fixed_skill("s", "hi", 0.5)).url)},
        },
    )
    result = await run.run(turn("hello"))
    trace = calls(result)
    assert trace["second"].start >= trace["first"].start + trace["first"].duration
    assert trace["s"].start >= trace["second"].start + trace["second"].duration
    assert result.utterance.annotations == {"first": {"chars": 5}, "second": {"chars": 5}}


async def test_a_failed_required_service_skips_its_dependants() -> None:
    run = in_memory(
        {
            "annotators": {"broken": lambda request: Response(503, b"x")},
            "skills": {
                "needs": (saying("no", 1.0), {"required_previous_services": ["broken"]}),
                "free": saying("yes", 0.1),
            },
        }
    )
    result = await run.run(turn())
    kinds = {e.service: e.kind for e in result.utterance.errors}
    assert kinds == {"broken": "bad_status", "needs": "skipped"}
    assert calls(result)["needs"].outcome == "skipped"
    assert result.bot_utterance.text == "yes"


async def test_the_skill_selector_chooses_which_skills_run() -> None:
    run = in_memory(
        {
            "skill_selectors": {"picker": telling([["quiet"]])},
            "skills": {"loud": saying("LOUD", 1.0), "quiet": saying("psst", 0.1)},
        }
    )
    result = await run.run(turn())
    assert calls(result)["loud"].outcome == "skipped"
    assert [h.skill_name for h in result.utterance.hypotheses] == ["quiet"]
    assert result.utterance.errors == []


async def test_the_selector_decision_is_stored_and_binds_only_the_skills_it_decides() -> None:
    decision = {"skills": ["quiet"], "reason": "intent hush → quiet", "decides": ["loud", "quiet"]}
    run = in_memory(
        {
            "skill_selectors": {"decider": telling([decision])},
            "skills": {
                "loud": saying("LOUD", 1.0),
                "quiet": saying("psst", 0.1),
                "new": saying("I am new", 0.5),
            },
        }
    )
    result = await run.run(turn())
    assert calls(result)["loud"].outcome == "skipped"
    # "new" is no skill the selector decides about: it runs whatever was chosen.
    assert sorted(h.skill_name for h in result.utterance.hypotheses) == ["new", "quiet"]
    (stored,) = result.utterance.skill_selection
    assert stored.model_dump() == {"selector": "decider", **decision}


async def test_a_bare_list_of_names_decides_about_every_skill() -> None:
    run = in_memory(
        {
            "skill_selectors": {"picker": telling([["quiet"]])},
            "skills": {"quiet": saying("psst", 0.1), "new": saying("I am new", 0.5)},
        }
    )
    result = await run.run(turn())
    assert calls(result)["new"].outcome == "skipped"
    assert [d.model_dump() for d in result.utterance.skill_selection] == [
        {"selector": "picker", "skills": ["quiet"], "reason": None, "decides": None}
    ]


def test_an_utterance_stored_before_selector_decisions_still_reads() -> None:
    old = {
        "speaker": "human",
        "utt_id": "u1",
        "text": "hi",
        "user": {},
        "date_time": "2026-01-01T00:00:00Z",
        "attributes": {},
        "annotations": {},
        "hypotheses": [],
        "errors": [],
        "trace": [],
    }
    assert HumanUtterance.model_validate(old).skill_selection == []


async def test_a_skill_cannot_write_outside_its_slot() -> None:
    claim = {"text": "trust me", "confidence": 1.0, "skill_name": "greeting"}
    run = in_memory({"skills": {"impostor": telling([[claim]]), "honest": saying("hi", 0.2)}})
    result = await run.run(turn())
    (error,) = result.utterance.errors
    assert (error.service, error.kind) == ("impostor", "refused")
    assert "skill_name" in error.message
    assert [h.skill_name for h in result.utterance.hypotheses] == ["honest"]


async def test_attribute_keys_that_could_escape_their_slot_are_refused() -> None:
    sneaky = [[{"text": "x", "confidence": 1.0, "human_attributes": {"$set": {"id": "me"}}}]]
    run = in_memory({"skills": {"sneaky": telling(sneaky)}})
    result = await run.run(turn())
    assert result.utterance.errors[0].kind == "bad_response"
    assert "'$set' is not allowed" in result.utterance.errors[0].message
    assert result.human_attributes == {}


async def test_candidate_annotators_and_the_response_selector() -> None:
    def lengths(dialog: DialogView) -> list[dict[str, int]]:
        return [{"chars": len(h.text)} for h in dialog.human_utterance.hypotheses]

    def last(dialog: DialogView) -> dict[str, Any]:
        return {"index": len(dialog.human_utterance.hypotheses) - 1, "reason": "the last one"}

    run = in_memory(
        {
            "skills": {
                "a": saying("short", 0.9, topic="a"),
                "b": saying("much longer", 0.1, topic="b"),
            },
            "candidate_annotators": {"lengths": answering(lengths)},
            "response_selectors": {"last": answering(last)},
            "response_annotators": {
                "after": answering(lambda dialog: {"chars": len(dialog.last_utterance.text)})
            },
        }
    )
    result = await run.run(turn())
    assert [h.annotations for h in result.utterance.hypotheses] == [
        {"lengths": {"chars": 5}},
        {"lengths": {"chars": 11}},
    ]
    assert result.bot_utterance.active_skill == "b"
    assert result.bot_utterance.attributes == {"selector_reason": "the last one"}
    assert result.human_attributes == {"topic": "b"}
    assert result.bot_utterance.annotations == {"after": {"chars": 11}}


async def test_a_failing_response_selector_falls_back_to_confidence() -> None:
    run = in_memory(
        {
            "skills": {"a": saying("sure", 0.9), "b": saying("maybe", 0.3)},
            "response_selectors": {"bad": telling([{"index": 7}])},
        }
    )
    result = await run.run(turn())
    assert result.bot_utterance.text == "sure"
    assert result.utterance.errors[0].message == "chose hypothesis 7 of 2"
    assert "selector gave no choice" in result.bot_utterance.attributes["selector_reason"]


async def test_no_hypothesis_gives_the_fallback() -> None:
    run = in_memory({"skills": {"empty": telling([[]])}}, fallback_response="Nothing to say.")
    result = await run.run(turn())
    assert (result.bot_utterance.text, result.bot_utterance.active_skill) == (
        "Nothing to say.",
        FALLBACK_SKILL,
    )
    assert result.utterance.errors == []


async def test_concurrent_turns_share_a_batch() -> None:
    requests: list[int] = []

    def skill(request: Request) -> Response:
        dialogs = request.json()["dialogs"]
        requests.append(len(dialogs))
        return Response.of_json([[{"text": "hi", "confidence": 0.5}] for _ in dialogs])

    run = in_memory({"skills": {"s": (skill, {"connector": {"batch_size": 4}})}})
    results = await asyncio.gather(*(run.run(turn(f"t{i}")) for i in range(3)))
    assert requests == [3]
    assert [calls(r)["s"].batch_size for r in results] == [3, 3, 3]
    assert all(r.bot_utterance.text == "hi" for r in results)


async def test_a_second_write_to_an_annotation_slot_is_refused_and_keeps_the_first() -> None:
    from agent.pipeline.executor import _Run
    from agent.turn.limits import RefusedOutput

    run_ = in_memory({"annotators": {"a": telling([{}])}})
    node = run_.pipeline.nodes[0]
    state = _Run(turn(), run_.pipeline, lambda: 0.0)
    view = state.view(node)
    run_._apply(state, node, {"first": True}, view)
    with pytest.raises(RefusedOutput, match="'a' was already written this turn"):
        run_._apply(state, node, {"second": True}, view)
    assert state.utterance.annotations == {"a": {"first": True}}
