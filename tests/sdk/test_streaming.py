"""A streaming skill over real HTTP: the chunked JSON-lines answer, and the same skill
answering the usual JSON list to a caller that does not ask for a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import HTTPException

from agent.sdk import DialogView, Service, StreamStart
from agent.sdk.streaming import STREAM_MEDIA_TYPE, parse_line
from tests.support.servers import serving
from tests.support.services import streaming_skill
from tests.support.views import view

STREAM = {"Accept": STREAM_MEDIA_TYPE}


def streamed(url: str, *dialogs: dict[str, Any]) -> tuple[httpx.Response, list[tuple[str, Any]]]:
    with httpx.stream(
        "POST", f"{url}/respond", json={"dialogs": list(dialogs)}, headers=STREAM
    ) as response:
        if response.status_code != 200:
            response.read()
            return response, []
        lines: list[tuple[str, Any]] = [
            parse_line(line.encode()) for line in response.iter_lines() if line
        ]
    return response, lines


def test_a_streamed_answer_is_start_tokens_then_the_json_answer() -> None:
    with serving(streaming_skill("story", ["Hel", "lo!"], confidence=0.7)) as server:
        response, lines = streamed(server.url, view("hi"))
        assert response.headers["content-type"] == STREAM_MEDIA_TYPE
        hypothesis = {
            "text": "Hello!",
            "confidence": 0.7,
            "human_attributes": {},
            "bot_attributes": {},
            "told": 2,
        }
        start = {k: v for k, v in hypothesis.items() if k != "text"}
        assert lines == [
            ("start", start),
            ("token", "Hel"),
            ("token", "lo!"),
            ("end", [hypothesis]),
        ]
        plain = httpx.post(f"{server.url}/respond", json={"dialogs": [view("hi"), view("yo")]})
        assert plain.json() == [[hypothesis], [hypothesis]]


def test_a_failure_before_the_first_piece_is_a_status_after_it_an_error_line() -> None:
    service = Service("moody")

    @service.skill
    async def moody(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        if dialog.human_utterance.text == "early":
            raise HTTPException(502, "upstream down")
        yield StreamStart(confidence=0.5)
        yield "fine so far"
        raise RuntimeError("then it broke")

    with serving(service.app) as server:
        early, _ = streamed(server.url, view("early"))
        assert early.status_code == 502
        assert early.json() == {"detail": "upstream down"}
        late, lines = streamed(server.url, view("late"))
        assert late.status_code == 200
        assert lines[:2] == [
            ("start", {"confidence": 0.5, "human_attributes": {}, "bot_attributes": {}}),
            ("token", "fine so far"),
        ]
        assert lines[-1] == ("error", "RuntimeError: then it broke")


def test_a_skill_that_yields_nothing_answers_no_hypothesis() -> None:
    service = Service("silent")

    @service.skill
    async def silent(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        return
        yield  # an async generator

    with serving(service.app) as server:
        _, lines = streamed(server.url, view("hi"))
        assert lines == [("end", [])]
        assert httpx.post(f"{server.url}/respond", json={"dialogs": [view("hi")]}).json() == [[]]


def test_a_skill_must_announce_its_confidence_before_its_text() -> None:
    service = Service("rude")

    @service.skill
    async def rude(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        yield "no start"

    with serving(service.app) as server:
        response, _ = streamed(server.url, view("hi"))
        assert response.status_code == 500  # a bug in the skill, logged by the service
