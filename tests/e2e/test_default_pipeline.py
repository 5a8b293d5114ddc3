"""The shipped pipeline (pipeline.json) end to end: every reference service as it ships
(in the agent's process, or a real server for one named by its URL), the agent on both
stores, and a scripted conversation a user would have."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from agent.pipeline.kind import GROUP_FOLDERS
from skills.fallback.app import CALM_ANSWERS
from tests.conftest import SERVICE_TIMEOUT, TURN_TIMEOUT, AgentFactory
from tests.support.servers import ServerThread, serving

ROOT = Path(__file__).resolve().parents[2]


#: The reference services these tests are about. A service you add to pipeline.json
#: (`chorus new skill`) is tested by its own tests and left out here, so adding one keeps
#: these tests, which pin what the default bot says, green.
REFERENCE = {
    "annotators": {"tokens", "sentiment", "intents", "badwords"},
    "skill_selectors": {"rules"},
    "skills": {"handoff", "greeting", "faq", "smalltalk", "llm", "fallback"},
    "candidate_annotators": {"toxicity"},
    "response_selectors": {"confidence"},
}


def shipped_pipeline(
    services: Callable[[FastAPI], ServerThread], apps: dict[str, FastAPI] | None = None
) -> dict[str, Any]:
    """pipeline.json's reference services as it runs them: in the agent's process where it
    names a module, else started here on a free port; ``apps`` serves a service's app
    instead (e.g. the LLM skill over HTTP, pointed at a local endpoint)."""
    pipeline: dict[str, Any] = json.loads((ROOT / "pipeline.json").read_text())
    for group, entries in pipeline["services"].items():
        for name in set(entries) - REFERENCE.get(group, set()):
            del entries[name]
    for group, entries in pipeline["services"].items():
        for name, entry in entries.items():
            connector = entry["connector"]
            if name in (apps or {}) or "module" not in connector:
                module = importlib.import_module(f"{GROUP_FOLDERS[group]}.{name}.app")
                app = (apps or {}).get(name, module.app)
                connector.pop("module", None)
                connector["url"] = f"{services(app).url}/respond"
            # The shipped timeouts are a deployment's; a busy machine misses them.
            connector["timeout"] = SERVICE_TIMEOUT
    pipeline["turn_timeout"] = TURN_TIMEOUT
    return pipeline


def say(client: httpx.Client, text: str, user: str = "ann") -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def converse(client: httpx.Client, texts: list[str], user: str) -> tuple[list[dict[str, Any]], str]:
    """Each text said in turn by ``user``: the answers, and the transcript a failing
    assertion shows ("'hi' -> [greeting] 'Hi! ...'", a line a turn)."""
    answers = [say(client, text, user=user) for text in texts]
    shown = "\n".join(
        f"{text!r} -> [{a['active_skill']}] {a['response']!r}"
        for text, a in zip(texts, answers, strict=True)
    )
    return answers, shown


def test_a_conversation_through_the_default_pipeline(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)  # as in `make run` without an endpoint
    client = agent(shipped_pipeline(services))
    script = [
        ("Hello!", "greeting", "What's your name?"),
        ("Ann", "greeting", "Nice to meet you, Ann!"),
        ("What is Chorus?", "faq", "orchestrat"),
        ("How are you?", "smalltalk", ""),
        ("what is my name?", "greeting", "Your name is Ann."),
        ("zxqv plorb wug", "fallback", ""),
    ]
    for text, skill, expected in script:
        answer = say(client, text)
        assert (answer["active_skill"], text) == (skill, text), answer
        assert expected in answer["response"], (text, answer)

    (dialog,) = client.get("/api/user/ann").json()
    assert dialog["human"]["attributes"]["name"] == "Ann"
    assert "persona" in dialog["bot"]["attributes"]  # smalltalk keeps the persona there
    utterances = dialog["utterances"]
    assert [u["speaker"] for u in utterances] == ["human", "bot"] * len(script)
    first = utterances[0]
    assert set(first["annotations"]) == {"tokens", "sentiment", "intents", "badwords"}
    assert first["annotations"]["intents"]["intent"] == "greeting"
    assert not first["errors"], first["errors"]
    assert "greeting" in utterances[1]["attributes"]["selector_reason"]


def test_toxic_input_goes_to_the_fallback_only(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    client = agent(shipped_pipeline(services))
    answer = say(client, "you are a stupid idiot")
    assert answer["active_skill"] == "fallback"
    assert answer["response"] in CALM_ANSWERS
    (dialog,) = client.get("/api/user/ann").json()
    human = dialog["utterances"][0]
    assert human["annotations"]["badwords"] == {"toxic": True, "words": ["stupid", "idiot"]}
    skipped = {t["service"] for t in human["trace"] if t["outcome"] == "skipped"}
    assert {"greeting", "faq", "smalltalk"} <= skipped  # the skill selector kept them out
    assert [h["skill_name"] for h in human["hypotheses"]] == ["fallback"]


@pytest.fixture
def chat_completions() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local endpoint speaking OpenAI's chat-completions protocol (the real one is a
    third-party cloud API): rude about trains, polite otherwise."""
    seen: list[dict[str, Any]] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        seen.append(body)
        said = body["messages"][-1]["content"]
        reply = "Only an idiot talks about trains." if "train" in said else "Happy to chat!"
        return {
            "id": "x",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": reply},
                }
            ],
        }

    with serving(app) as server:
        yield f"{server.url}/v1", seen


def test_the_llm_skill_joins_when_configured_and_a_toxic_hypothesis_loses(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
    chat_completions: tuple[str, list[dict[str, Any]]],
) -> None:
    from skills.llm.app import LLMSettings, create_app

    base_url, seen = chat_completions
    monkeypatch.setenv("LLM_BASE_URL", base_url)  # the agent turns the skill on
    llm = create_app(LLMSettings(_env_file=None, base_url=base_url, model="test-model"))
    client = agent(shipped_pipeline(services, apps={"llm": llm}))

    answer = say(client, "let's chat about the sea")
    assert (answer["active_skill"], answer["response"]) == ("llm", "Happy to chat!")
    assert seen[-1]["model"] == "test-model"

    answer = say(client, "tell me about trains")
    assert answer["active_skill"] != "llm"  # the toxic hypothesis was penalised
    (dialog,) = client.get("/api/user/ann").json()
    human, bot = dialog["utterances"][2], dialog["utterances"][3]
    llm_hypothesis = next(h for h in human["hypotheses"] if h["skill_name"] == "llm")
    assert llm_hypothesis["annotations"]["toxicity"]["toxic"] is True
    assert "llm toxic" in bot["attributes"]["selector_reason"]
