"""``chorus telegram`` against a local server speaking the Telegram Bot API (the real one is
a third-party cloud API) and the real agent with real skills: a scripted conversation of
two users is answered, in order, through a failing ``getUpdates`` and a rate-limited
``sendMessage``; a bad token stops it with the Bot API's reason."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agent.cli.telegram import START_REPLY, TelegramError, run_channel
from agent.settings import SettingsError, TelegramSettings, load_telegram_settings
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry
from tests.support.processes import COMMAND_TIMEOUT

TOKEN = "123456:test-token"
#: A user who blocked the bot: the Bot API refuses to send them anything (403).
BLOCKED = 13


class FakeBotApi:
    """``getUpdates`` and ``sendMessage`` as the Bot API answers them, for a script of
    users' messages: each is released once the previous one was answered, as a person
    waits for the reply. The first ``getUpdates`` fails (502) and the first
    ``sendMessage`` is rate limited (429, retry_after 1)."""

    def __init__(self, script: list[tuple[int, str]], failing_polls: int = 1) -> None:
        self.script = script
        self.failing_polls = failing_polls
        self.updates: list[dict[str, Any]] = []
        self.sent: list[tuple[int, str]] = []
        self.calls: Counter[str] = Counter()
        self.blocked = 0
        self.done = threading.Event()
        self._answered = True
        self._news: asyncio.Event | None = None

    def _release(self) -> None:
        """The script's next message, once the previous one has been answered."""
        if self._answered and len(self.updates) < len(self.script):
            user, text = self.script[len(self.updates)]
            number = len(self.updates)
            self.updates.append(
                {
                    "update_id": 1000 + number,
                    "message": {
                        "message_id": number,
                        "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
                        "chat": {"id": user, "type": "private"},
                        "date": 1700000000 + number,
                        "text": text,
                    },
                }
            )
            self._answered = False

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/bot{token}/{method}")
        async def call(token: str, method: str, request: Request) -> JSONResponse:
            self.calls[method] += 1
            if token != TOKEN:
                return JSONResponse(
                    {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
                )
            body = await request.json()
            if self._news is None:
                self._news = asyncio.Event()
            if method == "getUpdates":
                if self.calls[method] <= self.failing_polls:
                    return JSONResponse({"ok": False, "description": "Bad Gateway"}, 502)
                offset = int(body.get("offset", 0))
                self._release()
                pending = [u for u in self.updates if u["update_id"] >= offset]
                if not pending:  # a long poll: wait for news, at most the client's timeout
                    self._news.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._news.wait(), float(body["timeout"]))
                    self._release()
                    pending = [u for u in self.updates if u["update_id"] >= offset]
                return JSONResponse({"ok": True, "result": pending})
            if method == "sendMessage":
                if self.calls[method] == 1:
                    return JSONResponse(
                        {
                            "ok": False,
                            "error_code": 429,
                            "description": "Too Many Requests: retry after 1",
                            "parameters": {"retry_after": 1},
                        },
                        429,
                    )
                self._answered = True
                self._news.set()
                chat = int(body["chat_id"])
                if chat == BLOCKED:
                    self.blocked += 1
                    reply = JSONResponse(
                        {
                            "ok": False,
                            "error_code": 403,
                            "description": "Forbidden: bot was blocked by the user",
                        },
                        403,
                    )
                else:
                    self.sent.append((chat, str(body["text"])))
                    reply = JSONResponse({"ok": True, "result": {"message_id": len(self.sent)}})
                if len(self.sent) + self.blocked == len(self.script):
                    self.done.set()
                return reply
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, 404)

        return app


def pipeline(services: Any) -> dict[str, Any]:
    return {
        "services": {
            "skills": {
                "greeting": service_entry(services(greeting_app).url),
                "fallback": service_entry(services(fallback_app).url),
            }
        }
    }


def settings(
    api_url: str, agent_url: str, token: str = TOKEN, retries: int = 3
) -> TelegramSettings:
    return TelegramSettings(
        token=token,
        api_url=api_url,
        agent_url=agent_url,
        poll_timeout=1,
        retries=retries,
        _env_file=None,
    )


def test_the_bot_answers_a_scripted_conversation(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services))
    ann, bob = 42, 7
    fake = FakeBotApi(
        [
            (ann, "/start"),
            (ann, "Hello!"),
            (ann, "Ann"),
            (bob, "Hello!"),
            (BLOCKED, "Hello!"),
            (ann, "what is my name?"),
        ]
    )
    telegram = services(fake.app())
    asyncio.run(run_channel(settings(telegram.url, str(client.base_url)), stop=fake.done.is_set))

    assert [chat for chat, _ in fake.sent] == [ann, ann, ann, bob, ann]
    texts = [text for _, text in fake.sent]
    assert texts[0] == START_REPLY
    assert texts[1] == "Hi! I'm Chorus. What's your name?"
    assert "Ann" in texts[2]
    assert texts[3] == "Hi! I'm Chorus. What's your name?"  # another user, another dialog
    assert "Ann" in texts[4]
    # The 502 and the 429 were tried again; every answer was sent once; the blocked user's
    # refusal cost only that answer.
    assert fake.calls["sendMessage"] == len(fake.script) + 1
    assert fake.blocked == 1
    # The Telegram user is the agent's user: their dialog holds the conversation.
    (dialog,) = client.get(f"/api/user/{ann}").json()
    assert [u["text"] for u in dialog["utterances"][::2]] == ["Hello!", "Ann", "what is my name?"]
    assert [u["text"] for u in dialog["utterances"][1::2]] == texts[1:3] + texts[4:]


def test_polling_goes_on_after_an_outage_longer_than_the_retries(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    fake = FakeBotApi([(42, "Hello!")], failing_polls=4)  # retries=1: two calls fail each
    telegram = services(fake.app())
    config = settings(telegram.url, str(client.base_url), retries=1)
    asyncio.run(run_channel(config, stop=fake.done.is_set))
    assert fake.sent == [(42, "Hi! I'm Chorus. What's your name?")]
    assert fake.calls["getUpdates"] >= 5


def test_a_message_the_agent_refuses_is_answered_with_what_to_fix(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), max_text_length=10)
    fake = FakeBotApi([(42, "a message longer than ten characters")])
    telegram = services(fake.app())
    asyncio.run(run_channel(settings(telegram.url, str(client.base_url)), stop=fake.done.is_set))
    ((chat, text),) = fake.sent
    assert chat == 42
    assert text.startswith("Sorry, I could not take that message: ")
    assert "the limit is 10" in text


@pytest.mark.store_agnostic
def test_a_bad_token_stops_the_bot_with_the_bot_apis_reason(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    telegram = services(FakeBotApi([]).app())
    with pytest.raises(TelegramError, match=r"401: Unauthorized.*CHORUS_TELEGRAM_TOKEN"):
        asyncio.run(run_channel(settings(telegram.url, str(client.base_url), token="1:wrong")))


def test_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.delenv("CHORUS_TELEGRAM_TOKEN", raising=False)
    with pytest.raises(SettingsError, match="CHORUS_TELEGRAM_TOKEN: required"):
        load_telegram_settings()
    monkeypatch.setenv("CHORUS_TELEGRAM_TOKEN", TOKEN)
    monkeypatch.setenv("CHORUS_TELEGRAM_API_URL", "api.telegram.org")
    with pytest.raises(SettingsError, match="CHORUS_TELEGRAM_API_URL: must be an http"):
        load_telegram_settings()


def test_chorus_telegram_without_a_token_says_which_variable(tmp_path: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_TELEGRAM_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # this checkout's agent
    result = subprocess.run(
        [sys.executable, "-m", "agent.cli.main", "telegram"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # no .env here
        timeout=COMMAND_TIMEOUT,
    )
    assert result.returncode == 2
    assert "CHORUS_TELEGRAM_TOKEN: required" in result.stderr
    assert "Traceback" not in result.stderr
