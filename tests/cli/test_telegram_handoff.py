"""``chorus telegram`` through a handoff and back (docs/handoff.md, "Telegram"), against a
local server speaking the Telegram Bot API and the real agent with real skills, on both
stores: the Telegram user asks for a person and is told one is coming; an operator claims
the dialog and answers through the operator routes, and the user receives it in their chat;
the user's next message gets nothing from the bot; the operator hands back and the bot
answers again, with the operator's words in the dialog's history."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agent.cli.telegram import run_channel
from skills.handoff.app import app as handoff_app
from tests.cli.test_telegram import TOKEN, pipeline, settings
from tests.conftest import AgentFactory, service_entry
from tests.support.events import events_of
from tests.support.processes import COMMAND_TIMEOUT

OPERATOR_KEY = "operator-key-for-telegram-0123"
ANNOUNCE = "A person will take over here in a moment."
ANN = 42
GREETING = "Hi! I'm Chorus. What's your name?"

# The channel reaches the agent at its URL, as a process of its own does: a served agent.
pytestmark = pytest.mark.served


class ChatBotApi:
    """``getUpdates`` and ``sendMessage`` as the Bot API answers them, for a user the test
    makes write (:meth:`say`) whenever it likes: a message needs no answer before the next,
    as a user waiting for a person may write again. What the bot sends is kept in
    :attr:`sent`, and :meth:`wait_for` waits until it holds a number of messages."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.sent: list[str] = []
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._news: asyncio.Event | None = None

    def say(self, user: int, text: str) -> None:
        number = len(self.updates)
        with self._changed:
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
        if self._loop is not None and self._news is not None:
            self._loop.call_soon_threadsafe(self._news.set)

    def wait_for(self, count: int) -> list[str]:
        """What the bot has sent, once it is ``count`` messages (a failure if it is not
        within the command timeout)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.sent) >= count, COMMAND_TIMEOUT):
                pytest.fail(f"the bot sent {self.sent}, not {count} messages")
            return list(self.sent)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/bot{token}/{method}")
        async def call(token: str, method: str, request: Request) -> JSONResponse:
            assert token == TOKEN
            body = await request.json()
            if self._news is None:
                self._loop, self._news = asyncio.get_running_loop(), asyncio.Event()
            if method == "getUpdates":
                offset = int(body.get("offset", 0))
                pending = [u for u in self.updates if u["update_id"] >= offset]
                if not pending:  # a long poll: wait for news, at most the client's timeout
                    self._news.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._news.wait(), float(body["timeout"]))
                    pending = [u for u in self.updates if u["update_id"] >= offset]
                return JSONResponse({"ok": True, "result": pending})
            if method == "sendMessage":
                assert int(body["chat_id"]) == ANN
                with self._changed:
                    self.sent.append(str(body["text"]))
                    self._changed.notify_all()
                return JSONResponse({"ok": True, "result": {"message_id": len(self.sent)}})
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, 404)

        return app


@pytest.fixture
def bot_api(services: Any) -> ChatBotApi:
    return ChatBotApi()


@pytest.fixture
def running_bot(services: Any, agent: AgentFactory, bot_api: ChatBotApi) -> Iterator[httpx.Client]:
    """The agent (greeting, fallback, the handoff skill; handoffs on) and ``chorus
    telegram`` polling the local Bot API in a thread, stopped at the test's end."""
    config = pipeline(services)
    config["services"]["skills"]["handoff"] = service_entry(services(handoff_app).url)
    config["handoff"] = {"announce": ANNOUNCE}
    client = agent(config, operator_key=OPERATOR_KEY)
    telegram = services(bot_api.app())
    stopping = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(
                run_channel(settings(telegram.url, str(client.base_url)), stop=stopping.is_set)
            )
        except BaseException as exc:  # reported by the test, not lost in the thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="chorus-telegram")
    thread.start()
    try:
        yield client
    finally:
        stopping.set()
        thread.join(COMMAND_TIMEOUT)
    assert not thread.is_alive(), "chorus telegram did not stop"
    assert not failure, failure


def operator(name: str = "ann") -> dict[str, str]:
    return {"X-Operator-Key": OPERATOR_KEY, "X-Operator": name}


def test_a_telegram_user_talks_to_an_operator_and_back_to_the_bot(
    running_bot: httpx.Client, bot_api: ChatBotApi
) -> None:
    client = running_bot
    bot_api.say(ANN, "Hello!")
    assert bot_api.wait_for(1) == [GREETING]
    bot_api.say(ANN, "I want to talk to a human")
    assert bot_api.wait_for(2)[1] == ANNOUNCE

    (entry,) = client.get("/api/operator/dialogs", headers=operator()).json()["dialogs"]
    assert entry["handoff"]["user_id"] == str(ANN)
    dialog_id = entry["handoff"]["dialog_id"]
    assert client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator()).is_success
    written = client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(),
        json={"text": "Hi, I'm Ann. How can I help?"},
    )
    assert written.status_code == 201
    assert bot_api.wait_for(3)[2] == "Hi, I'm Ann. How can I help?"

    # The user writes again: the message reaches the operator, and the bot says nothing.
    with client.stream(
        "GET",
        f"/api/operator/dialogs/{dialog_id}/events",
        params={"after": written.json()["utterance"]["utt_id"]},
        headers=operator(),
    ) as live:
        events = events_of(live.iter_lines())
        assert next(events)[1]["state"] == "held"
        bot_api.say(ANN, "Are you a bot?")
        kind, seen = next(events)
    assert (kind, seen["text"], seen["handed_off"]) == ("utterance", "Are you a bot?", True)
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(),
        json={"text": "No, a person. I'll hand you back now."},
    )
    assert bot_api.wait_for(4)[3] == "No, a person. I'll hand you back now."
    back = client.post(f"/api/operator/dialogs/{dialog_id}/handback", headers=operator())
    assert back.json()["handoff"]["state"] == "returned"

    # The bot answers again. Messages of a user are answered in order, so a bot answer to
    # "Are you a bot?" would have come before this one: there is none.
    bot_api.say(ANN, "Thanks!")
    assert bot_api.wait_for(5) == [
        GREETING,
        ANNOUNCE,
        "Hi, I'm Ann. How can I help?",
        "No, a person. I'll hand you back now.",
        bot_api.sent[4],
    ]
    assert bot_api.sent[4] not in bot_api.sent[:4]
    stored = client.get(f"/api/dialogs/{dialog_id}").json()["utterances"]
    assert [u["text"] for u in stored] == [
        "Hello!",
        GREETING,
        "I want to talk to a human",
        ANNOUNCE,
        "Hi, I'm Ann. How can I help?",
        "Are you a bot?",
        "No, a person. I'll hand you back now.",
        "Thanks!",
        bot_api.sent[4],
    ]


def test_a_person_asked_for_through_the_api_is_announced_on_telegram(
    running_bot: httpx.Client, bot_api: ChatBotApi
) -> None:
    client = running_bot
    bot_api.say(ANN, "Hello!")
    assert bot_api.wait_for(1) == [GREETING]
    (dialog,) = client.get(f"/api/user/{ANN}", params={"view": "chorus"}).json()
    dialog_id = dialog["dialog_id"]
    asked = client.post(f"/api/dialogs/{dialog_id}/handoff", json={"reason": "a supervisor"})
    assert asked.status_code == 201

    # The bot learns of it with the user's next message, which the bot does not answer:
    # the announcement stored meanwhile is what the user gets.
    bot_api.say(ANN, "Anyone there?")
    assert bot_api.wait_for(2) == [GREETING, ANNOUNCE]
    client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator())
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(),
        json={"text": "Yes: Ann here."},
    )
    assert bot_api.wait_for(3)[2] == "Yes: Ann here."
    assert client.delete(f"/api/dialogs/{dialog_id}/handoff").json()["handoff"]["state"] == (
        "returned"
    )
    bot_api.say(ANN, "Hello!")
    sent = bot_api.wait_for(4)
    assert sent[:3] == [GREETING, ANNOUNCE, "Yes: Ann here."]
    # The bot's own answer: the last utterance of the dialog, from a skill.
    last = client.get(f"/api/dialogs/{dialog_id}", params={"view": "chorus"}).json()
    answer = last["utterances"][-1]
    assert (answer["text"], answer["operator"]) == (sent[3], None)
    assert answer["active_skill"] not in ("operator", "handoff")
