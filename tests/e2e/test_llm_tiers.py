"""The shipped pipeline with the LLM on (README's ``LLM_BASE_URL=... LLM_MODEL=...``): the
cheap skills answer what they know without calling the LLM, the LLM answers the rest and
its answer streams, and the fallback speaks only when the LLM cannot. Every service runs
as pipeline.json ships it; the LLM endpoint is a local server speaking
OpenAI's streamed chat completions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.api.test_chat_ws import socket, turn_frames
from tests.conftest import AgentFactory
from tests.e2e.test_default_pipeline import say, shipped_pipeline
from tests.support.events import follow
from tests.support.openai_stream import StreamingOpenAI
from tests.support.servers import ServerThread, serving

SKY = ["Sunlight ", "scatters ", "off ", "the ", "air, ", "and ", "blue ", "scatters ", "most."]


def with_llm(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
    base_url: str,
) -> httpx.Client:
    """The agent on pipeline.json, the LLM skill pointed at ``base_url`` as the README's
    line does it (the skill runs in the agent's process, as shipped)."""
    monkeypatch.setenv("LLM_BASE_URL", base_url)
    monkeypatch.setenv("LLM_MODEL", "test-model")
    return agent(shipped_pipeline(services))


def test_cheap_skills_answer_without_the_llm_and_the_llm_streams_the_rest(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = StreamingOpenAI(SKY)
    with serving(model.app) as endpoint:
        client = with_llm(agent, services, monkeypatch, f"{endpoint.url}/v1")
        for text, skill in [
            ("Hello!", "greeting"),
            ("My name is Ann", "greeting"),
            ("How are you?", "smalltalk"),
            ("What can you do?", "faq"),
        ]:
            answer = say(client, text)
            assert (text, answer["active_skill"]) == (text, skill), answer
        assert model.requests == []  # the LLM was not asked

        _, events = follow(
            client, "/", {"user_id": "ann", "payload": "Explain why the sky is blue."}
        )
        tokens = [data["text"] for kind, data in events if kind == "token"]
        kind, answer = events[-1]
        assert (kind, answer["active_skill"]) == ("answer", "llm"), events[-3:]
        assert len(tokens) >= 3 and "".join(tokens) == answer["response"] == "".join(SKY)
        assert len(model.requests) == 1
        system = model.requests[0]["messages"][0]
        assert "The user's name is Ann." in system["content"]

        answer = say(client, "What is my name?")
        assert "Ann" in answer["response"], answer
    assert len(model.requests) == 1

    (dialog,) = client.get("/api/user/ann").json()
    assert dialog["human"]["attributes"]["name"] == "Ann"
    sky = dialog["utterances"][8]
    trace = {call["service"]: call["outcome"] for call in sky["trace"]}
    assert trace["llm"] == "ok"
    used = next(h for h in sky["hypotheses"] if h["skill_name"] == "llm")["usage"]
    assert dialog["bot"]["attributes"]["tokens_spent"] == {"llm": used["total_tokens"]}
    metrics = client.get("/metrics").text
    assert f'chorus_skill_tokens_total{{skill="llm"}} {float(used["total_tokens"])}' in metrics


def test_the_fallback_answers_when_the_llm_fails(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = FastAPI()

    @broken.post("/v1/chat/completions")
    async def refuse() -> Any:
        raise RuntimeError("the model crashed")

    with serving(broken) as endpoint:
        client = with_llm(agent, services, monkeypatch, f"{endpoint.url}/v1")
        answer = say(client, "Explain why the sky is blue.")
    assert answer["active_skill"] == "fallback"  # not the pipeline's "no answer" line
    (dialog,) = client.get("/api/user/ann").json()
    (error,) = [e for e in dialog["utterances"][0]["errors"] if e["service"] == "llm"]
    assert "LLM endpoint" in error["message"]


@pytest.mark.served  # a WebSocket
def test_the_llm_s_answer_streams_over_the_websocket_too(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = StreamingOpenAI(SKY)
    with serving(model.app) as endpoint:
        client = with_llm(agent, services, monkeypatch, f"{endpoint.url}/v1")
        with socket(client, "?events=true") as ws:
            greeted = turn_frames(ws, {"user_id": "ann", "payload": "Hello!"})
            sky = turn_frames(ws, {"user_id": "ann", "payload": "Explain why the sky is blue."})
    assert greeted[-1]["data"]["active_skill"] == "greeting"
    assert "token" not in [f["event"] for f in greeted]
    tokens = [f["data"]["text"] for f in sky if f["event"] == "token"]
    assert sky[-1]["event"] == "answer" and sky[-1]["data"]["active_skill"] == "llm"
    assert len(tokens) >= 3 and "".join(tokens) == sky[-1]["data"]["response"]
    assert len(model.requests) == 1
