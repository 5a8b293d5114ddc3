"""``chorus telegram``: a Telegram bot that talks to a running agent.

A long-polling client of the Telegram Bot API (``getUpdates``, ``sendMessage``): each
message becomes a message to the agent's ``POST /`` from user ``str(from.id)`` (the
Telegram user, as dp-agent's Telegram channel names them), and the answer is sent back to
the chat. Its text is the message's text, else its caption, else ``''``; its photo, voice
and video go to the services as attributes, as dp-agent's channel sends them (see
:mod:`agent.cli.telegram_media`). ``/start`` (what Telegram sends when a user opens the
bot) and ``/close`` end the user's open dialog, as they do on dp-agent's chat API;
``/start`` is answered with :data:`START_REPLY`. Other updates (stickers, edits,
documents) are passed over.

While the user's dialog is with a person (docs/handoff.md), the agent answers nothing
(a ``202`` with an empty ``response``: the bot sends nothing either) and what the operator
writes is followed and sent to the chat as it comes
(:mod:`agent.cli.telegram_handoff`), until the dialog is back with the bot.

Both sides fail in their own ways, and neither may lose a message or answer one twice:

* The agent is sent each message with the idempotency key ``telegram-<update_id>``, so a
  retry after a network error, a 503 or a 409 "being answered" gets the first answer.
* The Bot API's rate limit (HTTP 429 with ``parameters.retry_after``) is waited out, at
  least the back-off (a ``retry_after`` of 0 or less is no reason to hammer it) and at
  most ``MAX_RETRY_AFTER`` (a longer one is waited that long, then the call tried again);
  a network error, a 5xx or a reply that is not the Bot API's is retried with back-off
  too. Either is tried ``RETRIES`` times, and polling goes on after that, so the bot
  outlives an outage; anything else (a bad token: 401) stops the client with the Bot
  API's description.
* An update is acknowledged (the next ``getUpdates`` offset passes it) only once it is
  answered (:mod:`agent.cli.telegram_queue`), so a restarted client answers the rest; the
  agent's key keeps a message answered before the restart from being run again. A
  malformed update is logged and skipped, and acknowledged with its poll, so a restart
  does not meet it again.
* An answer the Bot API refuses for its chat (403: the user blocked the bot) is logged
  and dropped; only ``getUpdates`` refusing (a bad token) stops the client.

At most ``BATCH`` updates (the ``limit`` of ``getUpdates``) are under way, answered
``CONCURRENCY`` users at a time and in order within a user: the work under way, and what
SIGTERM has to cancel, stays that small however many updates are waiting. The bot polls
again while they are answered, so a user whose media are slow to arrive (each file has
``MEDIA_DEADLINE`` seconds) holds only their own messages.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from agent.cli.telegram_handoff import HandoffFollower
from agent.cli.telegram_media import FileServer, MediaError, media_attributes
from agent.cli.telegram_queue import Answering
from agent.cli.telegram_settings import TelegramSettings
from agent.cli.telegram_updates import (
    FileInfo,
    Message,
    Parameters,
    Reply,
    Update,
    parse_updates,
)
from agent.sdk.errors import ChorusError
from agent.state.handoff import HandoffStatus

log = logging.getLogger("chorus.telegram")

#: What ``/start`` is answered with (the agent has ended the user's open dialog).
START_REPLY = "Hi! A new conversation starts here: say something."
#: Payloads the agent takes as commands rather than messages (see :mod:`agent.flow`).
START, CLOSE = "/start", "/close"
#: Seconds of the first back-off after a network error or a 5xx; it doubles up to the cap.
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 30.0
#: Most seconds between two polls while updates are under way: the poll can no longer
#: wait for news (the updates under way are sent again at once), and a new user's message
#: should not wait for a slow one. Sooner when half a batch is answered, or all of it.
BUSY_POLL_INTERVAL = 1.0
#: Seconds a stopping bot gives the Bot API to take its last acknowledgement.
ACKNOWLEDGE_WAIT = 5.0


class TelegramError(ChorusError):
    """The Bot API refused a call in a way retrying cannot fix, or kept failing
    (``lasting``: it may work later, as after a network outage)."""

    def __init__(self, message: str, *, lasting: bool = False) -> None:
        super().__init__(message)
        self.lasting = lasting


def _text(reply: httpx.Response) -> str:
    return reply.text[:200].replace("\n", " ")


def _reason(reply: httpx.Response) -> str:
    """What the agent's 4xx says to fix (its ``message``, else ``detail``)."""
    try:
        body = reply.json()
    except ValueError:
        return _text(reply)
    if isinstance(body, dict):
        return str(body.get("message") or body.get("detail") or _text(reply))
    return _text(reply)


class BotApi:
    """The Bot API methods the channel uses, with retries and the rate limit."""

    def __init__(self, http: httpx.AsyncClient, settings: TelegramSettings) -> None:
        self._http = http
        token = settings.token.get_secret_value()
        self._base = f"{settings.api_url}/bot{token}"
        self._files = f"{settings.api_url}/file/bot{token}"
        self._retries = settings.polling.retries
        self._poll_timeout = settings.polling.poll_timeout
        self._max_file_bytes = settings.polling.max_file_bytes
        self._max_retry_after = settings.polling.max_retry_after
        #: updates one ``getUpdates`` asks for, and the most a batch answers
        self.batch = settings.polling.batch

    async def call(
        self, method: str, payload: dict[str, Any], request_timeout: float = 30.0
    ) -> Any:
        """``result`` of one Bot API call; retried after a 429 (as long as it says, within
        the back-off and ``MAX_RETRY_AFTER``), a 5xx, a network error or a reply that is
        not the Bot API's (with back-off), ``RETRIES`` times; :class:`TelegramError`
        otherwise. ``request_timeout`` bounds each HTTP request, whatever the rate limit
        asks to wait."""
        failures, backoff = 0, FIRST_BACKOFF
        while True:
            try:
                response = await self._http.post(
                    f"{self._base}/{method}", json=payload, timeout=request_timeout
                )
                reply = (
                    Reply.model_validate_json(response.content)
                    if response.headers.get("content-type", "").startswith("application/json")
                    else Reply()
                )
            except (httpx.TransportError, ValidationError) as exc:
                problem = f"{type(exc).__name__}: {str(exc)[:200]}"
            else:
                if response.status_code == 429:
                    retry_after = (reply.parameters or Parameters()).retry_after
                    asked = 1 if retry_after is None else retry_after
                    failures += 1
                    if failures > self._retries:
                        raise TelegramError(
                            f"{method}: rate limited {failures} times, last told to wait {asked}s",
                            lasting=True,
                        )
                    # At least the back-off, so a retry_after of 0 or less is not a loop
                    # of requests; at most the cap, so a day's wait is not the bot's end.
                    pause = min(max(asked, backoff), self._max_retry_after)
                    if asked > self._max_retry_after:
                        log.warning(
                            "%s: rate limited, told to wait %ds; waiting %gs "
                            "(MAX_RETRY_AFTER) and trying again",
                            method,
                            asked,
                            pause,
                        )
                    else:
                        log.warning("%s: rate limited, waiting %gs", method, pause)
                    await asyncio.sleep(pause)  # the Bot API's own rule: wait, then try again
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    continue
                if response.is_success and reply.ok:
                    return reply.result
                if response.status_code < 500:
                    description = reply.description or _text(response)
                    hint = " (check CHORUS_TELEGRAM_TOKEN)" if response.status_code == 401 else ""
                    raise TelegramError(
                        f"{method}: HTTP {response.status_code}: {description}{hint}"
                    )
                problem = f"HTTP {response.status_code}: {_text(response)}"
            failures += 1
            if failures > self._retries:
                raise TelegramError(
                    f"{method}: failed {failures} times, last: {problem}", lasting=True
                )
            log.warning("%s: %s; trying again in %.1fs", method, problem, backoff)
            await asyncio.sleep(backoff)  # back-off before trying again
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def get_updates(self, offset: int | None) -> Any:
        """The raw ``result`` of one long poll of at most :attr:`batch` updates (checked by
        :func:`~agent.cli.telegram_updates.parse_updates`, one update at a time)."""
        payload: dict[str, Any] = {
            "timeout": self._poll_timeout,
            "limit": self.batch,
            "allowed_updates": ["message"],
        }
        if offset is not None:
            payload["offset"] = offset
        return await self.call("getUpdates", payload, request_timeout=self._poll_timeout + 10)

    async def acknowledge(self, offset: int, acknowledged: int | None) -> None:
        """Tell the Bot API that the updates before ``offset`` are done (a ``getUpdates``
        with that offset that does not wait), when that is news; best effort, bounded by
        :data:`ACKNOWLEDGE_WAIT`: the bot is stopping."""
        if acknowledged is not None and offset <= acknowledged:
            return
        payload = {"offset": offset, "limit": 1, "timeout": 0, "allowed_updates": ["message"]}
        try:
            async with asyncio.timeout(ACKNOWLEDGE_WAIT):
                await self.call("getUpdates", payload, request_timeout=ACKNOWLEDGE_WAIT)
        except (TelegramError, TimeoutError) as exc:
            log.warning("updates before %d not acknowledged: %s", offset, exc)

    async def send_message(self, chat_id: int, text: str) -> None:
        await self.call("sendMessage", {"chat_id": chat_id, "text": text})

    async def download(self, file_id: str) -> tuple[str, bytes]:
        """A file a user sent: its ``file_path`` on Telegram and its content, at most
        ``MAX_FILE_BYTES``; :class:`MediaError` otherwise."""
        limit = self._max_file_bytes
        try:
            info = FileInfo.model_validate(await self.call("getFile", {"file_id": file_id}))
        except (TelegramError, ValidationError) as exc:
            raise MediaError(f"getFile: {exc}") from None
        if info.file_size is not None and info.file_size > limit:
            raise MediaError(
                f"the file is {info.file_size} bytes; the limit is {limit}{_LIMIT}",
                why=f"it is larger than the {limit // 1_000_000} MB the bot takes",
            )
        content = bytearray()
        try:
            async with self._http.stream("GET", info.url(self._files), timeout=60.0) as response:
                if not response.is_success:
                    raise MediaError(f"download: HTTP {response.status_code}")
                async for chunk in response.aiter_bytes():
                    content += chunk
                    if len(content) > limit:
                        raise MediaError(
                            f"the file is over the {limit} bytes limit{_LIMIT}",
                            why=f"it is larger than the {limit // 1_000_000} MB the bot takes",
                        )
        except httpx.HTTPError as exc:
            raise MediaError(f"download: {type(exc).__name__}: {exc}") from None
        return info.file_path, bytes(content)


_LIMIT = " (MAX_FILE_BYTES)"


class AgentAnswer(BaseModel):
    """What the channel reads of the agent's reply to ``POST /``: its text, and where its
    dialog's handoff stands (docs/api.md, "What the user's channel sees")."""

    model_config = ConfigDict(extra="ignore")

    response: str
    dialog_id: str | None = None
    utt_id: str | None = None
    handoff: HandoffStatus | None = None

    @property
    def kept(self) -> bool:
        """Stored, not answered: the dialog is with a person (the 202)."""
        return self.handoff is not None and self.utt_id is None

    @property
    def handed_off(self) -> bool:
        """The dialog is waiting for or held by a person after this reply."""
        return self.handoff is not None and self.handoff.state != "returned"


class AgentClient:
    """``POST /`` of the agent, retried under the message's idempotency key."""

    def __init__(self, http: httpx.AsyncClient, settings: TelegramSettings) -> None:
        self._http = http
        self._url = f"{settings.agent_url}/"
        self._retries = settings.polling.retries
        key = settings.api_key
        self._headers = {"X-API-Key": key.get_secret_value()} if key else {}

    async def answer(
        self, user_id: str, text: str, key: str, attributes: dict[str, Any] | None = None
    ) -> AgentAnswer:
        """The agent's answer, or what to tell the user when it refuses the message.
        ``attributes`` go with the text, as the utterance's (a photo's ``image``)."""
        failures, backoff = 0, FIRST_BACKOFF
        while True:
            try:
                reply = await self._http.post(
                    self._url,
                    json={**(attributes or {}), "user_id": user_id, "payload": text},
                    headers={**self._headers, "Idempotency-Key": key},
                    timeout=120.0,
                )
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if reply.is_success:
                    try:
                        return AgentAnswer.model_validate_json(reply.content)
                    except ValidationError:
                        problem = f"HTTP {reply.status_code} without an answer: {_text(reply)}"
                elif reply.status_code not in (409, 503) and reply.status_code < 500:
                    return AgentAnswer(
                        response=f"Sorry, I could not take that message: {_reason(reply)}"
                    )
                else:
                    problem = f"HTTP {reply.status_code}: {_text(reply)}"
            failures += 1
            if failures > self._retries:
                log.error("agent: message %s not answered: %s", key, problem)
                return AgentAnswer(
                    response="Sorry, I can't answer right now. Please try again later."
                )
            await asyncio.sleep(backoff)  # back-off; the key makes the retry safe
            backoff = min(backoff * 2, MAX_BACKOFF)


class TelegramChannel:
    """The loop: poll updates, answer each through the agent, send the answers back."""

    def __init__(
        self,
        bot: BotApi,
        agent: AgentClient,
        files: FileServer | None = None,
        concurrency: int = 8,
        media_deadline: float = 60.0,
        handoffs: HandoffFollower | None = None,
    ) -> None:
        self._bot = bot
        self._agent = agent
        self._handoffs = handoffs
        self._files = files
        self._concurrency = concurrency
        self._media_deadline = media_deadline

    async def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Poll until ``stop()`` says so (checked between polls; the updates under way are
        answered first) or the Bot API refuses."""
        answering = Answering(self._answer_logged, self._concurrency)
        polled: int | None = None  # the offset the Bot API was last given
        backoff = FIRST_BACKOFF
        try:
            while not stop():
                answering.check()
                try:
                    polled = answering.offset
                    result = await self._bot.get_updates(polled)
                    updates, highest = parse_updates(result, self._bot.batch)
                except TelegramError as exc:
                    if not exc.lasting:
                        raise
                    # A network or Bot API outage outlasted the retries: keep polling, a
                    # bot must come back by itself (each call backs off again).
                    log.error("%s; polling on", exc)
                    continue
                except ValueError as exc:  # not a list of updates, or none with an update_id
                    log.error("%s; polling again in %.1fs", exc, backoff)
                    await asyncio.sleep(backoff)  # the same poll would get the same answer
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    continue
                backoff = FIRST_BACKOFF
                to_answer = [(u.update_id, m) for u in updates if (m := _answerable(u)) is not None]
                if highest is not None:
                    answering.take(to_answer, highest)
                if answering.busy:
                    # The offset is held back by the updates under way: the Bot API would
                    # answer at once with what is known; wait for some of it to be answered.
                    await answering.wait(polled, max(1, self._bot.batch // 2), BUSY_POLL_INTERVAL)
            await answering.finish()
        except asyncio.CancelledError:
            # Stopped: acknowledge what was answered before the first update that was not,
            # so the next start neither loses one nor answers one twice.
            await answering.cancel()
            if answering.offset is not None:
                await self._bot.acknowledge(answering.offset, polled)
            raise
        except BaseException:
            await answering.cancel()  # the bot stops: nothing may run on without it
            raise
        finally:
            if self._handoffs is not None:
                await self._handoffs.stop()

    async def _answer_logged(self, update_id: int, message: Message) -> None:
        assert message.sender is not None  # see _answerable
        try:
            await self._answer(str(message.sender.id), update_id, message)
        except (ChorusError, httpx.HTTPError, ValueError) as exc:
            # Costs this message only; acknowledged all the same, or every restart would
            # fail on it again.
            log.error("update %d not answered: %s: %s", update_id, type(exc).__name__, exc)

    async def _answer(self, user_id: str, update_id: int, message: Message) -> None:
        text = message.said()
        media = await media_attributes(
            message, self._bot.download, self._files, self._media_deadline
        )
        answer = await self._agent.answer(user_id, text, f"telegram-{update_id}", media.attributes)
        said = START_REPLY if text.strip() == START else answer.response
        if answer.kept:
            said = ""  # with a person: the bot says nothing; the operator answers
        if note := media.note():
            said = f"{said}\n\n{note}" if said else note
        if said:
            try:
                await self._bot.send_message(message.chat.id, said)
            except TelegramError as exc:  # e.g. 403: this user blocked the bot
                log.warning("update %s: answer not delivered: %s", update_id, exc)
        if self._handoffs is None or answer.dialog_id is None:
            return
        if answer.utt_id is not None:
            self._handoffs.answered(answer.dialog_id, answer.utt_id)
        if answer.handed_off:
            # From this reply on; for a message kept, from the last thing the chat was sent
            # (a person asked for through the API: the announcement is after it).
            after = None if answer.kept else answer.utt_id
            await self._handoffs.start(answer.dialog_id, user_id, message.chat.id, after)


def delivering(bot: BotApi) -> Callable[[int, str], Awaitable[None]]:
    """Sends a text to a chat outside any answer (an operator's message); a refusal for
    that chat (403: the user blocked the bot) is logged and costs this message only."""

    async def send(chat_id: int, text: str) -> None:
        try:
            await bot.send_message(chat_id, text)
        except TelegramError as exc:
            log.warning("chat %s: message not delivered: %s", chat_id, exc)

    return send


def _answerable(update: Update) -> Message | None:
    """The update's message when the channel answers it: a user's text or media (a
    sticker, a location, a document, a channel post are passed over)."""
    message = update.message
    if message is None or message.sender is None:
        return None
    if message.text is None and not message.has_media():
        return None
    return message


async def run_channel(settings: TelegramSettings, stop: Callable[[], bool] = lambda: False) -> None:
    """Run :class:`TelegramChannel` with its HTTP clients, until ``stop()`` or SIGTERM.

    SIGTERM (``docker stop``) cancels what is under way at once; the updates answered
    before the first one that was not are acknowledged as it stops. The rest are
    answered at the next start, where the agent's idempotency key gives a message already
    answered the answer already made rather than a second turn."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        log.info("SIGTERM: stopping")
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
        handles_sigterm = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        handles_sigterm = False
    try:
        async with (
            httpx.AsyncClient() as telegram,
            httpx.AsyncClient() as agent,
            httpx.AsyncClient() as files,
        ):
            server = (
                None
                if settings.file_server_url is None
                else FileServer(files, settings.file_server_url)
            )
            bot = BotApi(telegram, settings)
            channel = TelegramChannel(
                bot,
                AgentClient(agent, settings),
                server,
                concurrency=settings.polling.concurrency,
                media_deadline=settings.polling.media_deadline,
                handoffs=HandoffFollower(agent, settings, delivering(bot)),
            )
            await channel.run(stop)
    except asyncio.CancelledError:
        if not terminated:
            raise
    finally:
        if handles_sigterm:
            loop.remove_signal_handler(signal.SIGTERM)
