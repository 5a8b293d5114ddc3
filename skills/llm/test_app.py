"""The LLM skill against a local server that speaks OpenAI's chat-completions protocol.

The real endpoint is a third-party cloud API, so the test stands one up on 127.0.0.1: a
small FastAPI app that records every request and answers as OpenAI does (or fails on
purpose). The skill's settings are built per test from a monkeypatched environment.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from agent.sdk.testing import ServiceClient, view
from skills.llm.app import (
    DEFAULT_SYSTEM_PROMPT,
    LLMSettings,
    SettingsError,
    app_from_environment,
    create_app,
    load_settings,
)
from tests.support.ports import free_port
from tests.support.servers import serving
from tests.support.strict_chat import StrictChat

PERSONA = {"name": "Robo", "description": "a cheerful robot", "likes": ["puns"]}


def completion(content: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def echo(body: dict[str, Any]) -> dict[str, Any]:
    return completion(f"echo: {body['messages'][-1]['content']}")


class FakeOpenAI:
    """``POST /v1/chat/completions``: records the request, answers with ``answer(body)``."""

    def __init__(self, answer: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.answer = answer or echo
        self.release = threading.Event()  # a slow endpoint waits for it
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.complete)

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append((dict(request.headers), body))
        answer = self.answer(body)
        if answer == "slow":
            await asyncio.to_thread(self.release.wait, 10)
            answer = completion("too late")
        return answer if isinstance(answer, Response) else JSONResponse(answer)


@contextmanager
def llm_against(
    fake: FakeOpenAI | StrictChat, monkeypatch: pytest.MonkeyPatch, **env: str
) -> Iterator[ServiceClient]:
    """The fake endpoint (a real server: the skill calls it over HTTP) and the skill
    configured for it, in-process; yields a client to the skill."""
    with serving(fake.app) as upstream:
        monkeypatch.setenv("LLM_BASE_URL", f"{upstream.url}/v1/")
        monkeypatch.setenv("LLM_MODEL", "test-model")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        try:
            with ServiceClient(create_app(LLMSettings(_env_file=None))) as skill:
                yield skill
        finally:
            if isinstance(fake, FakeOpenAI):
                fake.release.set()


def respond(skill: ServiceClient, *dialogs: dict[str, Any]) -> httpx.Response:
    return skill.post("/respond", json={"dialogs": list(dialogs)}, timeout=10)


def with_bot(
    dialog: dict[str, Any],
    *,
    attributes: dict[str, Any] | None = None,
    persona: dict[str, Any] | None = None,
) -> dict[str, Any]:
    dialog["bot"] = {"id": "b1", "attributes": attributes or {}, "persona": persona or {}}
    return dialog


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "BASE_URL",
        "MODEL",
        "API_KEY",
        "TIMEOUT",
        "CONFIDENCE",
        "MAX_TOKENS",
        "TEMPERATURE",
    ):
        monkeypatch.delenv(f"LLM_{name}", raising=False)


def test_prompt_persona_turns_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI(lambda body: completion("  Why did the robot cross the road?  "))
    dialog = with_bot(
        view(
            "Hello!",
            "Hi! I'm Chorus. What's your name?",
            "Tell me a joke",
            human_attributes={"name": "Ann"},
        ),
        attributes={"persona": PERSONA},
    )
    with llm_against(
        fake, monkeypatch, LLM_API_KEY="sk-test", LLM_CONFIDENCE="0.75", LLM_MAX_TOKENS="50"
    ) as skill:
        answer = respond(skill, dialog).json()
    assert answer == [
        [
            {
                "text": "Why did the robot cross the road?",
                "confidence": 0.75,
                "human_attributes": {},
                "bot_attributes": {},
                "llm_model": "test-model",
                # what the endpoint reported, for the agent's token budget
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ]
    ]
    ((headers, body),) = fake.requests
    assert headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 50
    assert body["temperature"] == 0.7
    system, *turns = body["messages"]
    assert system["role"] == "system"
    assert "You are Robo, a cheerful robot." in system["content"]
    assert "puns" in system["content"]
    assert "The user's name is Ann." in system["content"]
    assert turns == [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi! I'm Chorus. What's your name?"},
        {"role": "user", "content": "Tell me a joke"},
    ]


@pytest.mark.parametrize("window", range(1, 9))
def test_the_request_begins_with_system_then_user_however_the_window_falls(
    monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    lines = [f"{'user' if i % 2 == 0 else 'bot'} line {i}" for i in range(9)]  # the user's last
    strict = StrictChat()
    with llm_against(strict, monkeypatch) as skill:
        response = respond(skill, view(*lines[-window:]))
    assert response.status_code == 200, response.text
    assert response.json()[0][0]["text"] == "echo: user line 8"
    (body,) = strict.requests
    sent = [message["content"] for message in body["messages"][1:]]
    # every line of the window but a bot line that would come first
    assert sent == [line for line in lines[-window:] if line != lines[-window] or "user" in line]


def test_a_skipped_empty_bot_line_does_not_leave_two_user_messages_in_a_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    strict = StrictChat()
    with llm_against(strict, monkeypatch) as skill:
        response = respond(skill, view("Hello!", " ", "Tell me a joke"))
    assert response.status_code == 200, response.text
    (body,) = strict.requests
    assert body["messages"][1:] == [{"role": "user", "content": "Hello!\nTell me a joke"}]


def test_a_batch_answers_in_order_with_each_bots_persona(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeOpenAI()
    with llm_against(fake, monkeypatch) as skill:
        answer = respond(
            skill, with_bot(view("first"), persona={"name": "Ada"}), view("second")
        ).json()
    assert [a[0]["text"] for a in answer] == ["echo: first", "echo: second"]
    assert all(a[0]["confidence"] == 0.7 for a in answer)
    prompts = {
        body["messages"][-1]["content"]: body["messages"][0]["content"] for _, body in fake.requests
    }
    assert prompts["first"].startswith("You are Ada.")
    assert prompts["second"] == DEFAULT_SYSTEM_PROMPT
    assert all("authorization" not in headers for headers, _ in fake.requests)


def test_an_empty_reply_is_no_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    with llm_against(FakeOpenAI(lambda body: completion(None)), monkeypatch) as skill:
        assert respond(skill, view("hi")).json() == [[]]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Response("upstream exploded", status_code=500), "answered HTTP 500: upstream exploded"),
        (Response("not json", media_type="text/plain"), "not a chat completion"),
        ({"choices": []}, "not a chat completion"),
        ("slow", "no answer within 0.3s (LLM_TIMEOUT)"),
    ],
)
def test_a_failing_endpoint_is_a_502_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, answer: Any, message: str
) -> None:
    # Only the slow endpoint is timed out: the others answer at once, given time to (a busy
    # machine can take longer than 0.3 s to answer).
    timeout = "0.3" if isinstance(answer, str) and answer == "slow" else "10"
    with llm_against(FakeOpenAI(lambda body: answer), monkeypatch, LLM_TIMEOUT=timeout) as skill:
        response = respond(skill, view("hi"))
    assert response.status_code == 502
    assert message in response.json()["detail"]


def test_an_unreachable_endpoint_is_a_502(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("LLM_MODEL", "test-model")
    with ServiceClient(create_app(LLMSettings(_env_file=None))) as skill:
        response = respond(skill, view("hi"))
    assert response.status_code == 502
    assert "unreachable: ConnectError" in response.json()["detail"]


def test_unconfigured_it_answers_nothing_and_stays_healthy() -> None:
    with ServiceClient(create_app(LLMSettings(_env_file=None))) as skill:
        health = skill.get("/health").json()
        answer = respond(skill, view("hi"), view("there")).json()
        refused = respond(skill)
    assert health == {"status": "ok", "service": "llm", "role": "skill"}
    assert answer == [[], []]
    assert refused.status_code == 422
    assert "dialogs" in refused.text


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"LLM_BASE_URL": "https://api.example.org/v1"}, "LLM_MODEL is required"),
        ({"LLM_BASE_URL": "api.example.org", "LLM_MODEL": "m"}, "LLM_BASE_URL: must be an http"),
        ({"LLM_TIMEOUT": "0"}, "LLM_TIMEOUT"),
        ({"LLM_CONFIDENCE": "2"}, "LLM_CONFIDENCE"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], named: str
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=named):
        load_settings()


def test_misconfigured_it_stays_healthy_and_each_turn_gets_the_one_line_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.delenv("LLM_MODEL", raising=False)
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    with ServiceClient(app_from_environment(), raise_server_exceptions=False) as skill:
        health = skill.get("/health")
        answer = respond(skill, view("hi"))
    assert health.is_success
    assert answer.status_code == 503
    detail = answer.json()["detail"]
    assert detail.startswith("LLM skill is misconfigured: bad settings: LLM_MODEL is required")
    assert "\n" not in detail


def retrieval(*passages: tuple[str, str, float]) -> dict[str, Any]:
    """The retrieval annotator's annotation: (source, section, confidence) per passage."""
    return {
        "retrieval": {
            "query": "q",
            "passages": [
                {
                    "source": source,
                    "headings": ["Doc", section],
                    "section": section,
                    "link": f"{source}#{section.lower()}",
                    "text": f"What {section} says.",
                    "score": 0.03,
                    "confidence": confidence,
                }
                for source, section, confidence in passages
            ],
        }
    }


def test_retrieved_passages_go_into_the_prompt_and_citations_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(lambda body: completion("Run chorus import [2], after an export [1][2]."))
    annotations = retrieval(
        ("docs/backup.md", "Exporting", 0.6),
        ("docs/backup.md", "Restoring", 0.9),
        ("docs/api.md", "Examples", 0.0),  # quotes the question: never given
        # under LLM_KNOWLEDGE_MIN_CONFIDENCE, but the turn's best passage is over it
        ("docs/storage.md", "MongoDB", 0.1),
    )
    dialog = view("How do I restore a backup?", annotations=annotations)
    with llm_against(fake, monkeypatch, LLM_STREAM="false") as skill:
        (hypothesis,) = respond(skill, dialog).json()[0]
    system = fake.requests[0][1]["messages"][0]["content"]
    assert "[1] docs/backup.md, Doc > Exporting:\nWhat Exporting says." in system
    assert "[2] docs/backup.md, Doc > Restoring:\nWhat Restoring says." in system
    assert "[3] docs/storage.md, Doc > MongoDB:\nWhat MongoDB says." in system
    assert "docs/api.md" not in system
    assert "say that you do not know" in system
    assert hypothesis["text"] == "Run chorus import [2], after an export [1][2]."
    # In order of first citation, each once.
    assert [(c["n"], c["source"], c["section"], c["link"]) for c in hypothesis["citations"]] == [
        (2, "docs/backup.md", "Restoring", "docs/backup.md#restoring"),
        (1, "docs/backup.md", "Exporting", "docs/backup.md#exporting"),
    ]


def test_a_citation_of_no_given_passage_resolves_to_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI(lambda body: completion("As [7] says, I do not know."))
    dialog = view("What is a tier?", annotations=retrieval(("docs/glossary.md", "tier", 0.8)))
    with llm_against(fake, monkeypatch, LLM_STREAM="false") as skill:
        (hypothesis,) = respond(skill, dialog).json()[0]
    assert "citations" not in hypothesis


def test_without_a_confident_best_passage_the_prompt_is_the_usual_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The floor judges the turn by its best passage: a later one over it does not make
    small talk a question about the docs."""
    fake = FakeOpenAI()
    annotations = retrieval(("docs/api.md", "Jokes", 0.05), ("docs/skills.md", "Humour", 0.3))
    dialog = view("Tell me a joke", annotations=annotations)
    with llm_against(fake, monkeypatch, LLM_STREAM="false") as skill:
        (hypothesis,) = respond(skill, dialog).json()[0]
    assert fake.requests[0][1]["messages"][0]["content"] == DEFAULT_SYSTEM_PROMPT
    assert "citations" not in hypothesis
