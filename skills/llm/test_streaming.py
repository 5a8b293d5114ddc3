"""The LLM skill streams from an OpenAI-compatible endpoint (``stream: true``), tested
against a local server speaking that protocol (the real one is a cloud API)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from agent.sdk.streaming import STREAM_MEDIA_TYPE, parse_line
from skills.llm.app import LLMSettings, create_app
from tests.support.openai_stream import StreamingOpenAI
from tests.support.servers import serving
from tests.support.views import view

TOKENS = ["Why ", "did ", "the ", "robot ", "cross?"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BASE_URL", "MODEL", "API_KEY", "TIMEOUT", "CONFIDENCE", "STREAM"):
        monkeypatch.delenv(f"LLM_{name}", raising=False)


@contextmanager
def skill_against(fake: StreamingOpenAI, **env: Any) -> Iterator[str]:
    with serving(fake.app) as upstream:
        settings = LLMSettings(
            _env_file=None, base_url=f"{upstream.url}/v1", model="test-model", **env
        )
        with serving(create_app(settings)) as skill:
            yield skill.url


def streamed(url: str, text: str) -> list[tuple[str, Any]]:
    with httpx.stream(
        "POST",
        f"{url}/respond",
        json={"dialogs": [view(text)]},
        headers={"Accept": STREAM_MEDIA_TYPE},
        timeout=10,
    ) as response:
        assert response.status_code == 200
        return [parse_line(line.encode()) for line in response.iter_lines() if line]


def test_the_reply_is_streamed_token_by_token_and_ends_with_the_whole_hypothesis() -> None:
    fake = StreamingOpenAI([" ", *TOKENS])  # leading whitespace is dropped
    with skill_against(fake, confidence=0.65) as url:
        lines = streamed(url, "Tell me a joke")
    assert fake.requests[0]["stream"] is True
    assert fake.requests[0]["messages"][-1] == {"role": "user", "content": "Tell me a joke"}
    assert lines[0] == (
        "start",
        {
            "confidence": 0.65,
            "human_attributes": {},
            "bot_attributes": {},
            "llm_model": "test-model",
        },
    )
    assert [value for key, value in lines if key == "token"] == TOKENS
    (hypothesis,) = lines[-1][1]
    assert lines[-1][0] == "end"
    assert hypothesis["text"] == "".join(TOKENS) and hypothesis["llm_model"] == "test-model"


def test_replies_one_after_another_share_one_connection_to_the_endpoint() -> None:
    fake = StreamingOpenAI(TOKENS)
    with skill_against(fake) as url:
        replies = [streamed(url, text) for text in ("Tell me a joke", "Another one")]
    assert [[value for key, value in lines if key == "token"] for lines in replies] == [TOKENS] * 2
    assert len(fake.peers) == 2 and fake.peers[0] is not None
    assert fake.peers[1] == fake.peers[0]  # no new connection (and TLS handshake) a request


def test_a_stream_held_open_after_its_done_still_ends_the_reply() -> None:
    never = threading.Event()
    fake = StreamingOpenAI(TOKENS, linger=never)
    try:
        # LLM_TIMEOUT past the client's 10 s: the skill hangs up soon after [DONE]
        with skill_against(fake, timeout=60) as url:
            lines = streamed(url, "Tell me a joke")
    finally:
        never.set()
    assert [value for key, value in lines if key == "token"] == TOKENS
    assert lines[-1][0] == "end" and lines[-1][1][0]["text"] == "".join(TOKENS)


def test_a_json_caller_gets_the_same_hypothesis_whole() -> None:
    with skill_against(StreamingOpenAI(TOKENS)) as url:
        streamed_end = streamed(url, "Tell me a joke")[-1][1]
        plain = httpx.post(f"{url}/respond", json={"dialogs": [view("Tell me a joke")]}).json()
    assert plain == [streamed_end]


def test_a_stream_that_breaks_midway_ends_with_an_error_line() -> None:
    with skill_against(StreamingOpenAI(TOKENS, fail_after=2)) as url:
        lines = streamed(url, "Tell me a joke")
    assert [value for key, value in lines if key == "token"] == TOKENS[:2]
    key, message = lines[-1]
    assert key == "error" and "streamed something that is not a chunk" in message


def test_a_failing_endpoint_is_a_502_before_any_line() -> None:
    with serving(StreamingOpenAI(TOKENS).app) as upstream:
        settings = LLMSettings(_env_file=None, base_url=f"{upstream.url}/nowhere", model="m")
        with serving(create_app(settings)) as skill:
            response = httpx.post(
                f"{skill.url}/respond",
                json={"dialogs": [view("hi")]},
                headers={"Accept": STREAM_MEDIA_TYPE},
            )
    assert response.status_code == 502
    assert "answered HTTP 404" in response.json()["detail"]


def test_llm_stream_false_asks_for_a_whole_completion() -> None:
    fake = StreamingOpenAI(TOKENS)
    with skill_against(fake, stream=False) as url:
        lines = streamed(url, "Tell me a joke")
    assert "stream" not in fake.requests[0]
    assert [value for key, value in lines if key == "token"] == ["".join(TOKENS)]
