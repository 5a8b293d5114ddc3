"""Connectors over the in-memory transport: the same answers, faults and guard as over HTTP.

The HTTP behaviour itself (pools, sizes on the wire, chunked streams) is tested against
real servers in the neighbouring modules; here each service is a function.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent.connectors.breaker import CircuitBreaker, GuardedConnector
from agent.connectors.errors import (
    BadServiceResponse,
    BadServiceStatus,
    ServiceTimeout,
    ServiceUnavailable,
)
from agent.connectors.http import HttpConnector
from agent.connectors.transport import MockTransport, Request, Response
from agent.dream.connectors import BREAKER_THRESHOLD, make_dream_connectors
from agent.dream.graph import DreamPipeline
from agent.dream.kind import DreamKind
from agent.kinds import load_any_pipeline
from agent.sdk.contracts import CONTRACT_HEADER
from agent.sdk.models import DialogView
from tests.support.views import view

URL = "http://skill.test/respond"


def dialog(text: str = "hi") -> DialogView:
    return DialogView.model_validate(view(text))


async def test_a_call_posts_the_dialogs_and_reads_one_output_each() -> None:
    seen: list[Request] = []

    def skill(request: Request) -> Response:
        seen.append(request)
        texts = [d["utterances"][-1]["text"] for d in request.json()["dialogs"]]
        return Response.of_json([[{"text": text.upper(), "confidence": 0.5}] for text in texts])

    connector = HttpConnector("skill", URL, MockTransport(skill), timeout=5)
    outputs = await connector.call([dialog("a"), dialog("b")])
    assert outputs == [[{"text": "A", "confidence": 0.5}], [{"text": "B", "confidence": 0.5}]]
    (request,) = seen
    assert request.url == URL
    assert request.headers["Content-Type"] == "application/json"


async def test_faults_are_the_service_errors_http_gives() -> None:
    def broken_contract(request: Request) -> Response:
        body = json.dumps({"message": "handler returned 2 items for 1 dialog"}).encode()
        return Response(500, body, {CONTRACT_HEADER: "1"})

    with pytest.raises(BadServiceStatus, match="HTTP 503: busy"):
        await HttpConnector("skill", URL, MockTransport(lambda r: Response(503, b"busy")), 5).call(
            [dialog()]
        )
    with pytest.raises(Exception, match="handler returned 2 items for 1 dialog"):
        await HttpConnector("skill", URL, MockTransport(broken_contract), 5).call([dialog()])


async def test_an_answer_over_the_size_limit_is_refused_as_over_http() -> None:
    """The bound a connector puts on an answer holds whatever carries it: the same
    messages as over the wire (tests/connectors/test_wire.py)."""
    big = Response.of_json([[{"text": "x" * 5000, "confidence": 0.5}]])
    connector = HttpConnector(
        "skill", URL, MockTransport(lambda r: big), 5, max_response_bytes=1000
    )
    with pytest.raises(BadServiceResponse, match=r"answer of \d+ bytes is over the 1000 limit"):
        await connector.call([dialog()])


async def test_a_handler_that_never_answers_times_out() -> None:
    async def hanging(request: Request) -> Response:
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    connector = HttpConnector("skill", URL, MockTransport(hanging), timeout=0.05)
    with pytest.raises(ServiceTimeout, match=r"no answer within 0\.05s"):
        await connector.call([dialog()])


async def test_a_refused_connection_is_retried_by_the_guard() -> None:
    attempts: list[int] = []

    def down_once(request: Request) -> Response:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionRefusedError(111, "Connection refused")
        return Response.of_json([{"ok": True}])

    http = HttpConnector("skill", URL, MockTransport(down_once), timeout=5)
    guarded = GuardedConnector(http, CircuitBreaker("skill", 5, 10), retries=1)
    assert await guarded.call([dialog()]) == [{"ok": True}]
    assert len(attempts) == 2


async def test_a_streamed_answer_comes_line_by_line() -> None:
    lines: list[dict[str, Any]] = [
        {"start": {"confidence": 0.8}},
        {"token": "Hel"},
        {"token": "lo"},
        {"end": [{"text": "Hello", "confidence": 0.8}]},
    ]
    connector = HttpConnector(
        "story", URL, MockTransport(lambda r: Response.of_lines(lines)), timeout=5
    )
    got = [line async for line in connector.stream(dialog())]
    assert got == [
        ("start", {"confidence": 0.8}),
        ("token", "Hel"),
        ("token", "lo"),
        ("end", [{"text": "Hello", "confidence": 0.8}]),
    ]


async def test_a_connector_that_cannot_stream_answers_its_end_line() -> None:
    connector = HttpConnector(
        "plain", URL, MockTransport(lambda r: Response.of_json([[{"text": "hi"}]])), 5
    )
    guarded = GuardedConnector(connector, CircuitBreaker("plain", 5, 10), retries=0)
    assert [line async for line in guarded.stream(dialog())] == [("end", [{"text": "hi"}])]


def dp_agent_pipeline(tmp_path: Path, connector: dict[str, Any]) -> DreamPipeline:
    path = tmp_path / "pipeline_conf.json"
    service = {"connector": connector, "state_manager_method": "add_annotation"}
    path.write_text(json.dumps({"services": {"annotators": {"ner": service}}}))
    pipeline = load_any_pipeline(path)
    assert isinstance(pipeline, DreamKind)
    return pipeline.graph


async def test_a_dp_agent_service_is_behind_the_same_guard_without_retries(
    tmp_path: Path,
) -> None:
    calls: list[Any] = []

    def refusing(request: Request) -> Response:
        calls.append(request.json())
        raise ConnectionRefusedError(111, "Connection refused")

    pipeline = dp_agent_pipeline(tmp_path, {"protocol": "http", "url": URL})
    (batcher,) = make_dream_connectors(pipeline, MockTransport(refusing)).values()
    for _ in range(BREAKER_THRESHOLD):
        with pytest.raises(ServiceUnavailable, match="cannot reach"):
            await batcher.submit({"x": 1})
    assert len(calls) == BREAKER_THRESHOLD  # one request each: dp-agent makes no retries
    with pytest.raises(ServiceUnavailable, match="circuit open"):
        await batcher.submit({"x": 1})
    assert len(calls) == BREAKER_THRESHOLD


async def test_dp_agent_tasks_arriving_together_share_one_merged_request(
    tmp_path: Path,
) -> None:
    requests: list[Any] = []

    def lengths(request: Request) -> Response:
        requests.append(request.json())
        return Response.of_json([{"length": len(s)} for s in request.json()["sentences"]])

    connector = {"protocol": "http", "url": URL, "batch_size": 8}
    pipeline = dp_agent_pipeline(tmp_path, connector)
    (batcher,) = make_dream_connectors(pipeline, MockTransport(lengths)).values()
    sized = await asyncio.gather(*(batcher.submit({"sentences": ["x" * n]}) for n in (1, 2, 3)))
    assert requests == [{"sentences": ["x", "xx", "xxx"]}]
    assert sized == [({"length": 1}, 3), ({"length": 2}, 3), ({"length": 3}, 3)]
