"""``chorus telegram`` against a local server speaking the Telegram Bot API (the real one is
a third-party cloud API) and the real agent with real skills: a scripted conversation of
two users is answered, in order, through a failing ``getUpdates`` and a rate-limited
``sendMessage``; a bad token stops it with the Bot API's reason."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from email.parser import BytesParser
from email.policy import default
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from typer.testing import CliRunner

from agent.cli.main import app
from agent.cli.telegram import FIRST_BACKOFF, START_REPLY, TelegramError, run_channel
from agent.cli.telegram_settings import Polling, TelegramSettings, load_telegram_settings
from agent.sdk import DialogView, Service, SkillHypothesis
from agent.settings import SettingsError
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry
from tests.support.processes import COMMAND_TIMEOUT

# The channel reaches the agent at its URL, as a process of its own does: a served agent.
pytestmark = pytest.mark.served

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
        polling=Polling(retries=retries, poll_timeout=1),
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


def test_a_removed_telegram_variable_stops_the_bot_saying_it_is_a_constant(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("CHORUS_TELEGRAM_TOKEN", TOKEN)
    monkeypatch.setenv("CHORUS_TELEGRAM_CONCURRENCY", "2")
    with pytest.raises(SettingsError) as refused:
        load_telegram_settings()
    assert str(refused.value) == (
        "bad settings: CHORUS_TELEGRAM_CONCURRENCY is no longer read: a constant now "
        "(CONCURRENCY in agent.cli.telegram_settings, 8): unset it"
    )
    monkeypatch.delenv("CHORUS_TELEGRAM_CONCURRENCY")
    monkeypatch.setenv("CHORUS_TELEGRAM_POLL_TIMEOUT", "1")
    with pytest.raises(SettingsError, match=r"POLL_TIMEOUT is no longer read: a constant now"):
        load_telegram_settings()
    monkeypatch.delenv("CHORUS_TELEGRAM_POLL_TIMEOUT")
    monkeypatch.setenv("CHORUS_TELEGRAM_POLLING", '{"batch": 1}')  # not a variable either
    assert load_telegram_settings().polling == Polling()


def test_chorus_telegram_without_a_token_says_which_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command in the test's process, in a folder with no .env: its refusal is its
    output and exit code (a bot stopped by a signal is a process: the SIGTERM test)."""
    for name in [k for k in os.environ if k.startswith("CHORUS_TELEGRAM_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["telegram"])
    assert result.exit_code == 2
    assert "CHORUS_TELEGRAM_TOKEN: required" in result.stderr
    assert "Traceback" not in result.stderr


class BatchBotApi:
    """The Bot API with updates already waiting, as after a bot was down: each
    ``getUpdates`` gets those from its offset on, all of them unless ``honours_limit``
    (as a misbehaving or overloaded server may); ``getFile`` and the file download serve
    ``files``. ``first_send`` is the first ``sendMessage``'s reply (a 429, say)."""

    def __init__(
        self,
        updates: list[Any],
        expected: int,
        *,
        honours_limit: bool = True,
        files: dict[str, bytes] | None = None,
        first_send: tuple[int, dict[str, Any]] | None = None,
    ) -> None:
        self.updates = updates
        self.expected = expected
        self.honours_limit = honours_limit
        self.files = files or {}
        self.first_send = first_send
        self.polls: list[dict[str, Any]] = []
        self.sent: list[tuple[int, str]] = []
        self.calls: Counter[str] = Counter()
        self.done = threading.Event()
        self.answering = threading.Event()  # set at the first answer
        self.outside: list[str] = []  # paths fetched outside the bot's file folder
        self.file_paths: dict[str, str] = {}  # file_id -> the file_path getFile gives
        self.answered_at_poll: list[list[tuple[int, str]]] = []  # what was sent at each poll
        self.send_times: dict[int, list[float]] = {}  # chat -> when each sendMessage came

    def poll_refusal(self) -> tuple[int, dict[str, Any]] | None:
        """The status and reply refusing this ``getUpdates``, if it is refused."""
        return None

    def send_refusal(self, chat: int) -> tuple[int, dict[str, Any]] | None:
        """The status and reply refusing this ``sendMessage`` (``first_send``'s)."""
        return self.first_send if self.calls["sendMessage"] == 1 else None

    async def file(self, path: str) -> Response:
        """A file download's reply (a test's server may send it slowly)."""
        return Response(self.files[path], media_type="application/octet-stream")

    def answered(self, chat: int, text: str) -> None:
        """Called at each answer delivered (a test's server may then send more updates)."""

    def pending(self, offset: int, limit: int) -> list[Any]:
        waiting = [
            u
            for u in self.updates
            if not isinstance(u, dict)
            or not isinstance(u.get("update_id"), int)
            or u["update_id"] >= offset
        ]
        return waiting[:limit] if self.honours_limit else waiting

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/file/bot{token}/{path:path}")
        async def download(token: str, path: str) -> Response:
            if token != TOKEN or path not in self.files:
                return Response(status_code=404)
            return await self.file(path)

        @app.get("/{path:path}")
        async def elsewhere(path: str) -> Response:
            self.outside.append(path)  # what the bot must never fetch
            return Response(b"root:x:0:0", media_type="application/octet-stream")

        @app.post("/bot{token}/{method}")
        async def call(token: str, method: str, request: Request) -> JSONResponse:
            self.calls[method] += 1
            body = await request.json()
            if method == "getUpdates":
                self.polls.append(body)
                self.answered_at_poll.append(list(self.sent))
                if (refusal := self.poll_refusal()) is not None:
                    return JSONResponse(refusal[1], refusal[0])
                offset = int(body.get("offset", 0))
                pending = self.pending(offset, int(body.get("limit", 100)))
                if not pending:
                    await asyncio.sleep(0.05)  # an empty long poll (not a synchronisation)
                return JSONResponse({"ok": True, "result": pending})
            if method == "getFile":
                file_id = body["file_id"]
                path = f"voice/{file_id}.oga" if file_id.startswith("voice") else f"{file_id}.bin"
                path = self.file_paths.get(file_id, path)
                return JSONResponse({"ok": True, "result": {"file_id": file_id, "file_path": path}})
            if method == "sendMessage":
                self.send_times.setdefault(int(body["chat_id"]), []).append(time.monotonic())
                if (refusal := self.send_refusal(int(body["chat_id"]))) is not None:
                    return JSONResponse(refusal[1], refusal[0])
                self.sent.append((int(body["chat_id"]), str(body["text"])))
                self.answered(int(body["chat_id"]), str(body["text"]))
                self.answering.set()
                if len(self.sent) >= self.expected:
                    self.done.set()
                return JSONResponse({"ok": True, "result": {"message_id": len(self.sent)}})
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, 404)

        return app


async def trickle(start: bytes = b"") -> AsyncIterator[bytes]:
    """A reply that never ends, a byte at a time: no per-read timeout ever trips on it."""
    yield start
    while True:
        yield b"x"
        await asyncio.sleep(0.1)  # the server's pace, not a synchronisation


def run_bounded(config: TelegramSettings, stop: Callable[[], bool]) -> None:
    """``run_channel`` until ``stop()``; a bot that never gets there fails the test rather
    than hanging it."""

    async def bounded() -> None:
        async with asyncio.timeout(COMMAND_TIMEOUT):
            await run_channel(config, stop=stop)

    asyncio.run(bounded())


def message(update_id: int, user: int, text: str | None = None, **fields: Any) -> dict[str, Any]:
    """An update with a private message from ``user``."""
    body: dict[str, Any] = {
        "message_id": update_id,
        "from": {"id": user, "is_bot": False, "first_name": f"user{user}"},
        "chat": {"id": user, "type": "private"},
        "date": 1700000000,
        **fields,
    }
    if text is not None:
        body["text"] = text
    return {"update_id": update_id, "message": body}


def echo_app() -> FastAPI:
    """A skill that answers what the user said and the media it was shown: it fetches a
    photo's ``image`` link as a Dream service would and tells its size."""
    service = Service("echo")

    @service.skill
    async def echo(dialog: DialogView) -> SkillHypothesis:
        said = dialog.human_utterance
        parts = [f"said {said.text!r}"]
        image = said.attributes.get("image")
        if isinstance(image, str):
            async with httpx.AsyncClient() as http:
                fetched = await http.get(image)
            parts.append(f"image {len(fetched.content)} bytes")
        for key in ("sound_type", "sound_duration", "video_type", "video_duration"):
            if key in said.attributes:
                parts.append(f"{key}={said.attributes[key]}")
        for key in ("sound_path", "video_path"):
            if isinstance(said.attributes.get(key), str):
                async with httpx.AsyncClient() as http:
                    parts.append(f"{key} {len((await http.get(said.attributes[key])).content)}")
        return SkillHypothesis(text="; ".join(parts), confidence=1.0)

    return service.app


class FileServer:
    """Dream's file server (``files``): ``POST /`` with a multipart ``file`` is answered
    with its ``downloadLink``, which names the server as the compose network does
    (``http://files:3000``), not as the bot reaches it; ``GET /file?file=`` serves it."""

    def __init__(self, failing: bool = False, trickling: bool = False) -> None:
        self.failing = failing
        self.trickling = trickling  # its reply comes a byte at a time, and never ends
        self.stored: dict[str, tuple[str, bytes]] = {}

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/")
        async def upload(request: Request) -> Response:
            if self.failing:
                return JSONResponse({"error": "disk full"}, 500)
            if self.trickling:
                return StreamingResponse(trickle(b'{"downloadLink": "http://files:3000/'))
            form = BytesParser(policy=default).parsebytes(
                b"Content-Type: "
                + request.headers["content-type"].encode()
                + b"\r\n\r\n"
                + await request.body()
            )
            for part in form.iter_parts():
                if part.get_param("name", header="content-disposition") == "file":
                    name = str(part.get_filename())
                    key = f"{len(self.stored)}-{name.replace('/', '_')}"
                    content = part.get_payload(decode=True)
                    assert isinstance(content, bytes)
                    self.stored[key] = (part.get_content_type(), content)
                    return JSONResponse({"downloadLink": f"http://files:3000/file?file={key}"})
            return JSONResponse({"error": "no file"}, 400)

        @app.get("/file")
        async def serve(file: str) -> Response:
            if file not in self.stored:
                return Response(status_code=404)
            content_type, content = self.stored[file]
            return Response(content, media_type=content_type)

        return app


def media_settings(api_url: str, agent_url: str, files_url: str | None) -> TelegramSettings:
    return TelegramSettings(
        token=TOKEN,
        api_url=api_url,
        agent_url=agent_url,
        file_server_url=files_url,
        polling=Polling(retries=2, poll_timeout=1),
        _env_file=None,
    )


PHOTO = b"\xff\xd8" + b"p" * 3000  # the largest size of the photo
VOICE = b"OggS" + b"v" * 700
VIDEO = b"OggS" + b"w" * 1200


def media_updates() -> list[Any]:
    sizes = [{"file_id": "thumb", "width": 90, "height": 90}, {"file_id": "photo", "width": 800}]
    return [
        message(1, 42, caption="look at this", photo=sizes),
        message(2, 42, caption="hear me", voice={"file_id": "voice1", "duration": 3}),
        message(3, 7, caption="a clip", video={"file_id": "video1", "duration": 12}),
        message(4, 7, "plain text"),
    ]


SOUND = "sound_type=voice_message; sound_duration=3"
VIDEO_ATTRIBUTES = "video_type=video_attachment; video_duration=12"
MEDIA_FILES = {"photo.bin": PHOTO, "thumb.bin": b"small", "voice/voice1.oga": VOICE}
MEDIA_FILES["video1.bin"] = VIDEO


def test_photos_voice_and_video_reach_the_services_as_dp_agents_channel_sends_them(
    services: Any, agent: AgentFactory
) -> None:
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    files = FileServer()
    fake = BatchBotApi(media_updates(), 4, files=MEDIA_FILES)
    telegram, file_server = services(fake.app()), services(files.app())
    config = media_settings(telegram.url, str(client.base_url), file_server.url)
    asyncio.run(run_channel(config, stop=fake.done.is_set))

    assert sorted(fake.sent) == sorted(
        [
            (42, f"said 'look at this'; image {len(PHOTO)} bytes"),
            (42, f"said 'hear me'; {SOUND}; sound_path {len(VOICE)}"),
            (7, f"said 'a clip'; {VIDEO_ATTRIBUTES}; video_path {len(VIDEO)}"),
            (7, "said 'plain text'"),
        ]
    )
    # The largest size of the photo was uploaded, as dp-agent names and types it.
    uploads = sorted(files.stored.values(), key=lambda item: len(item[1]))
    assert [content_type for content_type, _ in uploads] == ["audio/ogg", "video/ogg", "image/jpg"]
    (dialog,) = client.get("/api/user/42").json()
    image = dialog["utterances"][0]["attributes"]["image"]
    assert image.startswith(file_server.url + "/file?file=")  # the link as the bot reaches it
    assert dialog["utterances"][0]["text"] == "look at this"


def test_a_photo_without_a_caption_reaches_the_services_as_an_empty_message_with_its_image(
    services: Any, agent: AgentFactory
) -> None:
    """dp-agent's channel sends such a photo as the text ``''`` with its ``image``: the
    agent takes it, and the skill sees the photo."""
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    sizes = [{"file_id": "thumb", "width": 90, "height": 90}, {"file_id": "photo", "width": 800}]
    fake = BatchBotApi([message(1, 42, photo=sizes)], 1, files=MEDIA_FILES)
    telegram, file_server = services(fake.app()), services(FileServer().app())
    config = media_settings(telegram.url, str(client.base_url), file_server.url)
    asyncio.run(run_channel(config, stop=fake.done.is_set))
    assert fake.sent == [(42, f"said ''; image {len(PHOTO)} bytes")]
    (dialog,) = client.get("/api/user/42").json()
    assert dialog["utterances"][0]["text"] == ""


def test_a_file_server_that_fails_costs_only_the_media(services: Any, agent: AgentFactory) -> None:
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    fake = BatchBotApi(media_updates()[:1], 1, files=MEDIA_FILES)
    telegram, file_server = services(fake.app()), services(FileServer(failing=True).app())
    config = media_settings(telegram.url, str(client.base_url), file_server.url)
    asyncio.run(run_channel(config, stop=fake.done.is_set))
    assert fake.sent == [(42, f"said 'look at this'\n\n{LOST_PHOTO} could not be stored. {AGAIN}")]


#: What a user whose photo did not reach the services is told, after the answer.
LOST_PHOTO, AGAIN = "(Your photo did not reach me: it", "Please send it again.)"


def test_malformed_updates_are_skipped_and_acknowledged(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services))
    no_chat = message(3, 42, "lost")
    del no_chat["message"]["chat"]
    updates = [
        message(1, 42, "Hello!"),
        {"update_id": "abc", "message": {"text": "hi"}},
        no_chat,
        {"update_id": 4, "message": "a string"},
        {"update_id": 5, "message": {"message_id": 5, "chat": {"id": "x"}, "text": "hi"}},
        message(6, 7, "Hello!"),
    ]
    # The first answer is rate limited with a retry_after that is not a number, the
    # second with 0: each is tried again and delivered.
    fake = BatchBotApi(
        updates,
        2,
        first_send=(429, {"ok": False, "error_code": 429, "parameters": {"retry_after": "soon"}}),
    )
    telegram = services(fake.app())
    config = settings(telegram.url, str(client.base_url), retries=2)
    run_bounded(config, stop=lambda: any(poll.get("offset") == 7 for poll in fake.polls))
    assert sorted(fake.sent) == [(7, GREETING), (42, GREETING)]
    # Once both messages are answered, the poll passes every update, the malformed ones
    # too, so a restarted bot does not meet them again; it never passed one unanswered.
    assert {poll.get("offset") for poll in fake.polls} <= {None, 1, 6, 7}


def test_a_rate_limit_of_zero_seconds_leaves_the_next_tries_their_timeout(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    fake = BatchBotApi(
        [message(1, 42, "Hello!")],
        1,
        first_send=(429, {"ok": False, "error_code": 429, "parameters": {"retry_after": 0}}),
    )
    telegram = services(fake.app())
    asyncio.run(run_channel(settings(telegram.url, str(client.base_url)), stop=fake.done.is_set))
    assert fake.sent == [(42, GREETING)]
    assert fake.calls["sendMessage"] == 2


def test_a_large_batch_is_answered_in_bounded_steps_in_order_per_user(
    services: Any, agent: AgentFactory
) -> None:
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    users, rounds = 40, 3
    updates = [message(n + 1, 100 + n % users, f"m{n // users}") for n in range(users * rounds)]
    # The server sends every waiting update whatever the limit: the bot still takes them
    # 16 at a time, 4 users at once.
    fake = BatchBotApi(updates, len(updates), honours_limit=False)
    telegram = services(fake.app())
    config = settings(telegram.url, str(client.base_url)).model_copy(
        update={"polling": Polling(retries=3, batch=16, concurrency=4, poll_timeout=1)}
    )
    asyncio.run(run_channel(config, stop=fake.done.is_set))
    assert {poll["limit"] for poll in fake.polls} == {16}
    for user in range(100, 100 + users):
        said = [text for chat, text in fake.sent if chat == user]
        assert said == [f"said 'm{n}'" for n in range(rounds)]
    answer_of = {n + 1: (100 + n % users, f"said 'm{n // users}'") for n in range(len(updates))}
    for poll, sent in zip(fake.polls, fake.answered_at_poll, strict=True):
        # Each poll acknowledged only updates already answered...
        offset = poll.get("offset", 1)
        assert {answer_of[n] for n in range(1, offset)} <= set(sent)
        # ...and nothing was answered beyond the 16 updates it let the bot see.
        assert {n for n, answer in answer_of.items() if answer in sent} < set(range(1, offset + 16))


def test_sigterm_stops_a_bot_with_thousands_of_updates_waiting(
    services: Any, agent: AgentFactory, tmp_path: Path
) -> None:
    client = agent(pipeline(services))
    updates = [message(n + 1, 1000 + n, "Hello!") for n in range(3000)]
    fake = BatchBotApi(updates, len(updates), honours_limit=False)
    telegram = services(fake.app())
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_TELEGRAM_")}
    env |= {
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "CHORUS_TELEGRAM_TOKEN": TOKEN,
        "CHORUS_TELEGRAM_API_URL": telegram.url,
        "CHORUS_TELEGRAM_AGENT_URL": str(client.base_url).rstrip("/"),
    }
    bot = subprocess.Popen(
        [sys.executable, "-m", "agent.cli.main", "telegram"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        answering = fake.answering.wait(90)
        bot.send_signal(signal.SIGTERM)
        _, stderr = bot.communicate(timeout=60)
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait()
    assert answering, "no update of the 3,000 was answered"
    assert bot.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert len(fake.sent) < len(updates)  # it stopped mid-way, as asked
    assert {poll["limit"] for poll in fake.polls} <= {100, 1}  # 1: the last acknowledgement
    # What the bot acknowledged last (the offset a restart starts from) was all answered:
    # stopping loses no message.
    acknowledged = max(poll.get("offset", 1) for poll in fake.polls)
    assert {1000 + n for n in range(acknowledged - 1)} <= {chat for chat, _ in fake.sent}


GREETING = "Hi! I'm Chorus. What's your name?"
PHOTO_SIZES = [{"file_id": "thumb", "width": 90}, {"file_id": "photo", "width": 800}]


class TricklingBotApi(BatchBotApi):
    """The Bot API whose download of the photo never ends, a byte at a time."""

    async def file(self, path: str) -> Response:
        if path == "photo.bin":
            return StreamingResponse(trickle(b"\xff\xd8"), media_type="image/jpeg")
        return await super().file(path)


@pytest.mark.parametrize("slow", ["telegram", "file server"])
def test_a_photo_that_never_arrives_is_given_up_at_its_deadline_and_the_user_told(
    services: Any, agent: AgentFactory, slow: str
) -> None:
    """A server sending a byte now and then trips no per-read timeout: the file's own
    deadline ends it, the message is answered without it, and the user is told."""
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    updates = [message(1, 42, caption="look at this", photo=PHOTO_SIZES), message(2, 7, "hi")]
    fake = (TricklingBotApi if slow == "telegram" else BatchBotApi)(updates, 2, files=MEDIA_FILES)
    telegram = services(fake.app())
    file_server = services(FileServer(trickling=slow == "file server").app())
    config = media_settings(telegram.url, str(client.base_url), file_server.url).model_copy(
        update={"polling": Polling(retries=2, poll_timeout=1, media_deadline=1.0)}
    )
    run_bounded(config, stop=fake.done.is_set)
    assert sorted(fake.sent) == [
        (7, "said 'hi'"),
        (42, f"said 'look at this'\n\n{LOST_PHOTO} took too long to arrive. {AGAIN}"),
    ]


class HeldPhotoBotApi(BatchBotApi):
    """The Bot API whose photo download waits until user 7 has had two answers; user 7's
    second message comes in a later poll, once their first was answered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.others_answered = threading.Event()

    async def file(self, path: str) -> Response:
        if path == "photo.bin":  # bounded: a bot that waits for the photo fails, not hangs
            await asyncio.to_thread(self.others_answered.wait, COMMAND_TIMEOUT / 6)
        return await super().file(path)

    def answered(self, chat: int, text: str) -> None:
        if (chat, text) == (7, "said 'first'"):
            self.updates.append(message(3, 7, "second"))
        elif (chat, text) == (7, "said 'second'"):
            self.others_answered.set()


def test_a_slow_photo_holds_no_other_users_message(services: Any, agent: AgentFactory) -> None:
    """The photo's user waits for it; another user's messages, in the photo's poll and in
    the next, are answered meanwhile (the bot polls on while the photo is under way)."""
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    updates = [message(1, 42, caption="look at this", photo=PHOTO_SIZES), message(2, 7, "first")]
    fake = HeldPhotoBotApi(updates, 3, files=MEDIA_FILES)
    telegram, file_server = services(fake.app()), services(FileServer().app())
    config = media_settings(telegram.url, str(client.base_url), file_server.url)
    run_bounded(config, stop=fake.done.is_set)
    assert fake.sent == [
        (7, "said 'first'"),
        (7, "said 'second'"),
        (42, f"said 'look at this'; image {len(PHOTO)} bytes"),
    ]
    # The photo's update held the offset back until it was answered.
    photo_answer = fake.sent[-1]
    for poll, sent in zip(fake.polls, fake.answered_at_poll, strict=True):
        if photo_answer not in sent:
            assert poll.get("offset", 1) <= 1


@pytest.mark.parametrize(
    "file_path",
    [
        "../../etc/passwd",
        "photos/../../../etc/passwd",
        "/etc/passwd",
        "%2e%2e/%2e%2e/etc/passwd",
        "http://127.0.0.1:9/x",
    ],
)
def test_a_file_path_outside_the_bots_file_folder_is_not_fetched(
    services: Any, agent: AgentFactory, file_path: str
) -> None:
    client = agent({"services": {"skills": {"echo": service_entry(services(echo_app()).url)}}})
    fake = BatchBotApi([message(1, 42, caption="look at this", photo=PHOTO_SIZES)], 1)
    fake.file_paths["photo"] = file_path
    telegram, file_server = services(fake.app()), services(FileServer().app())
    config = media_settings(telegram.url, str(client.base_url), file_server.url)
    run_bounded(config, stop=fake.done.is_set)
    assert fake.outside == []
    assert fake.sent == [(42, f"said 'look at this'\n\n{LOST_PHOTO} could not be fetched. {AGAIN}")]


class RateLimitingBotApi(BatchBotApi):
    """The Bot API rate limiting every answer to user 42 with ``retry_after``."""

    def __init__(self, *args: Any, retry_after: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after

    def send_refusal(self, chat: int) -> tuple[int, dict[str, Any]] | None:
        if chat != 42:
            return None
        return 429, {
            "ok": False,
            "error_code": 429,
            "parameters": {"retry_after": self.retry_after},
        }


@pytest.mark.parametrize("retry_after", [0, -5])
def test_a_rate_limit_of_no_time_is_backed_off_and_given_up(
    services: Any, agent: AgentFactory, retry_after: int
) -> None:
    """A 429 asking to wait 0 s or less is tried again after a growing back-off, as many
    times as a 5xx, then given up: the other user is answered, the bot polls on."""
    client = agent(pipeline(services))
    updates = [message(1, 42, "Hello!"), message(2, 7, "Hello!")]
    fake = RateLimitingBotApi(updates, 1, retry_after=retry_after)
    telegram = services(fake.app())
    config = settings(telegram.url, str(client.base_url), retries=2)
    run_bounded(config, stop=lambda: any(poll.get("offset") == 3 for poll in fake.polls))
    assert fake.sent == [(7, GREETING)]
    tries = fake.send_times[42]
    assert len(tries) == 3  # the first and two retries, not a flood
    waits = [later - earlier for earlier, later in itertools.pairwise(tries)]
    assert waits[0] >= FIRST_BACKOFF and waits[1] >= 2 * FIRST_BACKOFF  # waits that grow


class LongRateLimitBotApi(BatchBotApi):
    """The Bot API whose first ``getUpdates`` is told to wait a billion seconds."""

    def poll_refusal(self) -> tuple[int, dict[str, Any]] | None:
        if len(self.polls) > 1:
            return None
        return 429, {"ok": False, "error_code": 429, "parameters": {"retry_after": 1_000_000_000}}


def test_a_rate_limit_too_long_to_wait_is_waited_in_part_and_polling_goes_on(
    services: Any, agent: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = agent(pipeline(services))
    fake = LongRateLimitBotApi([message(1, 42, "Hello!")], 1)
    telegram = services(fake.app())
    config = settings(telegram.url, str(client.base_url)).model_copy(
        update={"polling": Polling(retries=3, poll_timeout=1, max_retry_after=0.5)}
    )
    with caplog.at_level("WARNING", logger="chorus.telegram"):
        run_bounded(config, stop=fake.done.is_set)
    assert fake.sent == [(42, GREETING)]
    assert "told to wait 1000000000s; waiting 0.5s (MAX_RETRY_AFTER)" in caplog.text
