"""The executor over real HTTP services: order, concurrency, slots, selection, batching.

Timing assertions use the executor's own trace (start offsets and durations it recorded),
never the wall clock of the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from agent.connectors.http import make_http_client
from agent.pipeline.config import parse_pipeline_config
from agent.pipeline.connectors import make_batchers
from agent.pipeline.executor import Executor, Turn, TurnResult
from agent.state.models import FALLBACK_SKILL, Bot, Human, HumanUtterance, ServiceCall
from tests.conftest import service_entry
from tests.support.servers import ServerThread
from tests.support.services import (
    choosing_skill_selector,
    deciding_skill_selector,
    fixed_skill,
    impostor_skill,
    last_index_selector,
    length_annotator,
    length_candidate_annotator,
    raw_app,
)

Services = Callable[[Any], ServerThread]


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with make_http_client() as http:
        yield http


def executor(client: aiohttp.ClientSession, services: dict[str, Any], **top: Any) -> Executor:
    from agent.pipeline.graph import build_pipeline

    pipeline = build_pipeline(parse_pipeline_config({"services": services, **top}))
    return Executor(pipeline, make_batchers(pipeline, client))


def turn(text: str = "hello") -> Turn:
    return Turn("d1", Human(user_external_id="u1"), Bot(), [], HumanUtterance(text=text))


def calls(result: TurnResult) -> dict[str, ServiceCall]:
    return {c.service: c for c in result.utterance.trace}


async def test_independent_skills_overlap(
    services: Services, client: aiohttp.ClientSession
) -> None:
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
    services: Services, client: aiohttp.ClientSession
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


async def test_a_failed_required_service_skips_its_dependants(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {
            "annotators": {"broken": service_entry(services(raw_app(b"x", status=503)).url)},
            "skills": {
                "needs": service_entry(
                    services(fixed_skill("needs", "no", 1.0)).url,
                    required_previous_services=["broken"],
                ),
                "free": service_entry(services(fixed_skill("free", "yes", 0.1)).url),
            },
        },
    )
    result = await run.run(turn())
    kinds = {e.service: e.kind for e in result.utterance.errors}
    assert kinds == {"broken": "bad_status", "needs": "skipped"}
    assert calls(result)["needs"].outcome == "skipped"
    assert result.bot_utterance.text == "yes"


async def test_the_skill_selector_chooses_which_skills_run(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {
            "skill_selectors": {
                "picker": service_entry(services(choosing_skill_selector("quiet")).url)
            },
            "skills": {
                "loud": service_entry(services(fixed_skill("loud", "LOUD", 1.0)).url),
                "quiet": service_entry(services(fixed_skill("quiet", "psst", 0.1)).url),
            },
        },
    )
    result = await run.run(turn())
    assert calls(result)["loud"].outcome == "skipped"
    assert [h.skill_name for h in result.utterance.hypotheses] == ["quiet"]
    assert result.utterance.errors == []


async def test_the_selector_decision_is_stored_and_binds_only_the_skills_it_decides(
    services: Services, client: aiohttp.ClientSession
) -> None:
    selector = deciding_skill_selector(["quiet"], "intent hush → quiet", ["loud", "quiet"])
    run = executor(
        client,
        {
            "skill_selectors": {"decider": service_entry(services(selector).url)},
            "skills": {
                "loud": service_entry(services(fixed_skill("loud", "LOUD", 1.0)).url),
                "quiet": service_entry(services(fixed_skill("quiet", "psst", 0.1)).url),
                "new": service_entry(services(fixed_skill("new", "I am new", 0.5)).url),
            },
        },
    )
    result = await run.run(turn())
    assert calls(result)["loud"].outcome == "skipped"
    # "new" is no skill the selector decides about: it runs whatever was chosen.
    assert sorted(h.skill_name for h in result.utterance.hypotheses) == ["new", "quiet"]
    (decision,) = result.utterance.skill_selection
    assert decision.model_dump() == {
        "selector": "decider",
        "skills": ["quiet"],
        "reason": "intent hush → quiet",
        "decides": ["loud", "quiet"],
    }


async def test_a_bare_list_of_names_decides_about_every_skill(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {
            "skill_selectors": {
                "picker": service_entry(services(choosing_skill_selector("quiet")).url)
            },
            "skills": {
                "quiet": service_entry(services(fixed_skill("quiet", "psst", 0.1)).url),
                "new": service_entry(services(fixed_skill("new", "I am new", 0.5)).url),
            },
        },
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


async def test_a_skill_cannot_write_outside_its_slot(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {
            "skills": {
                "impostor": service_entry(services(impostor_skill()).url),
                "honest": service_entry(services(fixed_skill("honest", "hi", 0.2)).url),
            }
        },
    )
    result = await run.run(turn())
    (error,) = result.utterance.errors
    assert (error.service, error.kind) == ("impostor", "refused")
    assert "skill_name" in error.message
    assert [h.skill_name for h in result.utterance.hypotheses] == ["honest"]


async def test_attribute_keys_that_could_escape_their_slot_are_refused(
    services: Services, client: aiohttp.ClientSession
) -> None:
    sneaky = raw_app(
        json_body=[[{"text": "x", "confidence": 1.0, "human_attributes": {"$set": {"id": "me"}}}]]
    )
    run = executor(client, {"skills": {"sneaky": service_entry(services(sneaky).url)}})
    result = await run.run(turn())
    assert result.utterance.errors[0].kind == "bad_response"
    assert "'$set' is not allowed" in result.utterance.errors[0].message
    assert result.human_attributes == {}


async def test_candidate_annotators_and_the_response_selector(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {
            "skills": {
                "a": service_entry(services(fixed_skill("a", "short", 0.9, topic="a")).url),
                "b": service_entry(services(fixed_skill("b", "much longer", 0.1, topic="b")).url),
            },
            "candidate_annotators": {
                "lengths": service_entry(services(length_candidate_annotator()).url)
            },
            "response_selectors": {"last": service_entry(services(last_index_selector()).url)},
            "response_annotators": {
                "after": service_entry(services(length_annotator("after")).url)
            },
        },
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


async def test_a_failing_response_selector_falls_back_to_confidence(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {
            "skills": {
                "a": service_entry(services(fixed_skill("a", "sure", 0.9)).url),
                "b": service_entry(services(fixed_skill("b", "maybe", 0.3)).url),
            },
            "response_selectors": {
                "bad": service_entry(services(raw_app(json_body=[{"index": 7}])).url)
            },
        },
    )
    result = await run.run(turn())
    assert result.bot_utterance.text == "sure"
    assert result.utterance.errors[0].message == "chose hypothesis 7 of 2"
    assert "selector gave no choice" in result.bot_utterance.attributes["selector_reason"]


async def test_no_hypothesis_gives_the_fallback(
    services: Services, client: aiohttp.ClientSession
) -> None:
    run = executor(
        client,
        {"skills": {"empty": service_entry(services(raw_app(json_body=[[]])).url)}},
        fallback_response="Nothing to say.",
    )
    result = await run.run(turn())
    assert (result.bot_utterance.text, result.bot_utterance.active_skill) == (
        "Nothing to say.",
        FALLBACK_SKILL,
    )
    assert result.utterance.errors == []


async def test_concurrent_turns_share_a_batch(
    services: Services, client: aiohttp.ClientSession
) -> None:
    url = services(fixed_skill("s", "hi", 0.5)).url
    run = executor(
        client, {"skills": {"s": {"connector": {"url": f"{url}/respond", "batch_size": 4}}}}
    )
    results = await asyncio.gather(*(run.run(turn(f"t{i}")) for i in range(3)))
    assert [calls(r)["s"].batch_size for r in results] == [3, 3, 3]
    assert all(r.bot_utterance.text == "hi" for r in results)


async def test_a_second_write_to_an_annotation_slot_is_refused_and_keeps_the_first(
    services: Services, client: aiohttp.ClientSession
) -> None:
    from agent.pipeline.executor import _Run
    from agent.pipeline.outputs import RefusedOutput

    run_ = executor(client, {"annotators": {"a": service_entry("http://127.0.0.1:9")}})
    node = run_.pipeline.nodes[0]
    state = _Run(turn(), run_.pipeline, lambda: 0.0)
    view = state.view(node)
    run_._apply(state, node, {"first": True}, view)
    with pytest.raises(RefusedOutput, match="'a' was already written this turn"):
        run_._apply(state, node, {"second": True}, view)
    assert state.utterance.annotations == {"a": {"first": True}}
