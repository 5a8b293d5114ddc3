"""``chorus telegram``: a Telegram bot that talks to a running agent.

A long-polling client of the Telegram Bot API (``getUpdates``, ``sendMessage``): each text
message becomes a message to the agent's ``POST /`` from user ``str(from.id)`` (the
Telegram user, as dp-agent's Telegram channel names them), and the answer is sent back to
the chat. ``/start`` (what Telegram sends when a user opens the bot) and ``/close`` end the
user's open dialog, as they do on dp-agent's chat API; ``/start`` is answered with
:data:`START_REPLY`. Other updates (stickers, edits, photos) are passed over.

Both sides fail in their own ways, and neither may lose a message or answer one twice:

* The agent is sent each message with the idempotency key ``telegram-<update_id>``, so a
  retry after a network error, a 503 or a 409 "being answered" gets the first answer.
* The Bot API's rate limit (HTTP 429 with ``parameters.retry_after``) is waited out and
  the call made again; a network error or a 5xx is retried with back-off
  (``CHORUS_TELEGRAM_RETRIES`` times, and polling goes on after that, so the bot
  outlives an outage); anything else (a bad token: 401) stops the client with the Bot
  API's description.
* An update is acknowledged (the next ``getUpdates`` offset passes it) only once it is
  answered, so a client restarted mid-batch answers the rest; the agent's key keeps a
  message answered before the restart from being run again.
* An answer the Bot API refuses for its chat (403: the user blocked the bot) is logged
  and dropped; only ``getUpdates`` refusing (a bad token) stops the client.

A batch of updates is answered concurrently across users and in order within a user.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import httpx

from agent.sdk.errors import ChorusError
from agent.settings import TelegramSettings

log = logging.getLogger("chorus.telegram")

#: What ``/start`` is answered with (the agent has ended the user's open dialog).
START_REPLY = "Hi! A new conversation starts here: say something."
#: Payloads the agent takes as commands rather than messages (see :mod:`agent.flow`).
START, CLOSE = "/start", "/close"
#: Seconds of the first back-off after a network error or a 5xx; it doubles up to the cap.
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 30.0
#: Longest ``retry_after`` honoured before giving up on a call (Telegram asks for seconds to
#: minutes; a bot told to wait an hour has a problem a person must look at).
MAX_RETRY_AFTER = 600


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
    """The two Bot API methods the channel uses, with retries and the rate limit."""

    def __init__(self, http: httpx.AsyncClient, settings: TelegramSettings) -> None:
        self._http = http
        self._base = f"{settings.api_url}/bot{settings.token.get_secret_value()}"
        self._retries = settings.retries
        self._poll_timeout = settings.poll_timeout

    async def call(self, method: str, payload: dict[str, Any], wait: float = 30.0) -> Any:
        """``result`` of one Bot API call; retried after a 429 (as long as it says), a 5xx
        or a network error (with back-off); :class:`TelegramError` otherwise."""
        failures, backoff = 0, FIRST_BACKOFF
        while True:
            try:
                reply = await self._http.post(f"{self._base}/{method}", json=payload, timeout=wait)
                body = (
                    reply.json()
                    if reply.headers.get("content-type", "").startswith("application/json")
                    else {}
                )
            except (httpx.TransportError, ValueError) as exc:  # ValueError: broken JSON
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if reply.status_code == 429:
                    wait = int((body.get("parameters") or {}).get("retry_after", 1))
                    if wait > MAX_RETRY_AFTER:
                        raise TelegramError(f"{method}: told to wait {wait}s (rate limit)")
                    log.warning("%s: rate limited, waiting %ds as the Bot API asks", method, wait)
                    await asyncio.sleep(wait)  # the Bot API's own rule: wait, then try again
                    continue
                if reply.is_success and body.get("ok"):
                    return body.get("result")
                if reply.status_code < 500:
                    description = body.get("description") or _text(reply)
                    hint = " (check CHORUS_TELEGRAM_TOKEN)" if reply.status_code == 401 else ""
                    raise TelegramError(f"{method}: HTTP {reply.status_code}: {description}{hint}")
                problem = f"HTTP {reply.status_code}: {_text(reply)}"
            failures += 1
            if failures > self._retries:
                raise TelegramError(
                    f"{method}: failed {failures} times, last: {problem}", lasting=True
                )
            log.warning("%s: %s; trying again in %.1fs", method, problem, backoff)
            await asyncio.sleep(backoff)  # back-off before trying again
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def get_updates(self, offset: int | None) -> list[dict[str, Any]]:
        payload: dict[str, Any] = {"timeout": self._poll_timeout, "allowed_updates": ["message"]}
        if offset is not None:
            payload["offset"] = offset
        result = await self.call("getUpdates", payload, wait=self._poll_timeout + 10)
        return [u for u in result or [] if isinstance(u, dict) and "update_id" in u]

    async def send_message(self, chat_id: int, text: str) -> None:
        await self.call("sendMessage", {"chat_id": chat_id, "text": text})


class AgentClient:
    """``POST /`` of the agent, retried under the message's idempotency key."""

    def __init__(self, http: httpx.AsyncClient, settings: TelegramSettings) -> None:
        self._http = http
        self._url = f"{settings.agent_url}/"
        self._retries = settings.retries
        key = settings.api_key
        self._headers = {"X-API-Key": key.get_secret_value()} if key else {}

    async def answer(self, user_id: str, text: str, key: str) -> str:
        """The agent's answer, or what to tell the user when it refuses the message."""
        failures, backoff = 0, FIRST_BACKOFF
        while True:
            try:
                reply = await self._http.post(
                    self._url,
                    json={"user_id": user_id, "payload": text},
                    headers={**self._headers, "Idempotency-Key": key},
                    timeout=120.0,
                )
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if reply.is_success:
                    return str(reply.json()["response"])
                if reply.status_code not in (409, 503) and reply.status_code < 500:
                    return f"Sorry, I could not take that message: {_reason(reply)}"
                problem = f"HTTP {reply.status_code}: {_text(reply)}"
            failures += 1
            if failures > self._retries:
                log.error("agent: message %s not answered: %s", key, problem)
                return "Sorry, I can't answer right now. Please try again later."
            await asyncio.sleep(backoff)  # back-off; the key makes the retry safe
            backoff = min(backoff * 2, MAX_BACKOFF)


class TelegramChannel:
    """The loop: poll updates, answer each through the agent, send the answers back."""

    def __init__(self, bot: BotApi, agent: AgentClient) -> None:
        self._bot = bot
        self._agent = agent

    async def run(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Poll until ``stop()`` says so (checked between polls) or the Bot API refuses."""
        offset: int | None = None
        while not stop():
            try:
                updates = await self._bot.get_updates(offset)
            except TelegramError as exc:
                if not exc.lasting:
                    raise
                # A network or Bot API outage outlasted the retries: keep polling, a bot
                # must come back by itself (each call backs off again).
                log.error("%s; polling on", exc)
                continue
            if not updates:
                continue
            by_user: dict[str, list[dict[str, Any]]] = {}
            for update in sorted(updates, key=lambda u: int(u["update_id"])):
                message = update.get("message") or {}
                sender = message.get("from") or {}
                if isinstance(message.get("text"), str) and "id" in sender:
                    by_user.setdefault(str(sender["id"]), []).append(update)
            await asyncio.gather(*(self._answer_all(u, us) for u, us in by_user.items()))
            offset = max(int(u["update_id"]) for u in updates) + 1

    async def _answer_all(self, user_id: str, updates: list[dict[str, Any]]) -> None:
        for update in updates:
            message = update["message"]
            text = message["text"]
            answer = await self._agent.answer(user_id, text, f"telegram-{update['update_id']}")
            if text.strip() == START:
                answer = START_REPLY
            try:
                await self._bot.send_message(message["chat"]["id"], answer)
            except TelegramError as exc:  # e.g. 403: this user blocked the bot
                log.warning("update %s: answer not delivered: %s", update["update_id"], exc)


async def run_channel(settings: TelegramSettings, stop: Callable[[], bool] = lambda: False) -> None:
    """Run :class:`TelegramChannel` with its two HTTP clients."""
    async with httpx.AsyncClient() as telegram, httpx.AsyncClient() as agent:
        channel = TelegramChannel(BotApi(telegram, settings), AgentClient(agent, settings))
        await channel.run(stop)
