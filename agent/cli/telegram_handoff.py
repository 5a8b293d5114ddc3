"""``chorus telegram`` while a dialog is with a person (docs/handoff.md, "Telegram").

The agent answers a Telegram user's message through ``POST /``; while their dialog is
waiting for or held by an operator it answers nothing (202, an empty ``response``), and
what the operator writes comes outside any reply. So once a reply says the dialog is
handed off, the bot follows the dialog's replies
(``GET /api/chat/dialogs/{id}/replies`` as Server-Sent Events, docs/api.md) and sends
each one to the user's chat as it is stored, until the dialog is back with the bot. One
follower runs per dialog, whatever the number of messages the user sends meanwhile.

A dialog handed off without the bot knowing (a person asked for through the API) is
followed from the user's next message, whose reply says so, starting after the last answer
the bot sent in that dialog: the announcement stored meanwhile reaches the user too.

A stream that breaks off (the agent restarted, a network error) is followed again from
the last reply sent, with back-off, so nothing is sent twice or lost. A bot restarted while
a dialog was handed off follows it again at the user's next message, from the end of the
dialog: what an operator wrote while the bot was down is not sent (it stays in the
dialog's history).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import httpx
from httpx_sse import SSEError, aconnect_sse
from pydantic import ValidationError

from agent.api.handoff_schemas import Delivered, Replies
from agent.cli.telegram_settings import TelegramSettings
from agent.state.handoff import HandoffStatus

log = logging.getLogger("chorus.telegram")

#: Seconds of the first back-off after a broken stream; it doubles up to the cap.
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 30.0

#: Dialogs whose last answer the bot remembers (the least recently answered forgotten first).
REMEMBERED = 10_000

#: Sends a text to a Telegram chat.
Send = Callable[[int, str], Awaitable[None]]


class HandoffFollower:
    """The dialogs being followed while they are with a person, one task each."""

    def __init__(self, http: httpx.AsyncClient, settings: TelegramSettings, send: Send) -> None:
        self._http = http
        self._agent = settings.agent_url
        key = settings.api_key
        self._headers = {"X-API-Key": key.get_secret_value()} if key else {}
        self._retries = settings.polling.retries
        self._send = send
        self._tasks: dict[str, asyncio.Task[None]] = {}
        #: the last utterance sent to each recent dialog's chat (an answer or an operator's
        #: message): where a follower starts when no reply says where
        self._sent: OrderedDict[str, str] = OrderedDict()

    def answered(self, dialog_id: str, utt_id: str) -> None:
        """Remember the bot's answer ``utt_id`` as the last thing its chat was sent."""
        self._remember(dialog_id, utt_id)

    def _remember(self, dialog_id: str, utt_id: str) -> None:
        self._sent[dialog_id] = utt_id
        self._sent.move_to_end(dialog_id)
        while len(self._sent) > REMEMBERED:
            self._sent.popitem(last=False)

    def following(self, dialog_id: str) -> bool:
        return dialog_id in self._tasks

    async def start(self, dialog_id: str, user_id: str, chat_id: int, after: str | None) -> None:
        """Follow ``dialog_id`` from the utterance ``after`` unless it is followed already;
        without ``after``, from the last utterance sent to the chat, else (a bot restarted
        meanwhile) from the end of the dialog."""
        if dialog_id in self._tasks:
            return
        if after is None:
            after = self._sent.get(dialog_id) or await self._end_of(dialog_id, user_id)
        task = asyncio.create_task(
            self._follow(dialog_id, user_id, chat_id, after), name=f"handoff-{dialog_id}"
        )
        self._tasks[dialog_id] = task
        task.add_done_callback(lambda done: self._forget(dialog_id, done))

    def _forget(self, dialog_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(dialog_id) is task:
            del self._tasks[dialog_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("dialog %s: following it failed: %r", dialog_id, error)

    async def stop(self) -> None:
        """Stop following every dialog (the bot is stopping)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _url(self, dialog_id: str) -> str:
        return f"{self._agent}/api/chat/dialogs/{dialog_id}/replies"

    async def _end_of(self, dialog_id: str, user_id: str) -> str | None:
        """The id of the dialog's last utterance (reads of the replies route, ``after`` the
        last read's end until nothing follows)."""
        after: str | None = None
        while True:
            params = {"user_id": user_id} | ({"after": after} if after else {})
            response = await self._http.get(
                self._url(dialog_id), params=params, headers=self._headers, timeout=30.0
            )
            response.raise_for_status()
            read = Replies.model_validate_json(response.content)
            if read.last_utt_id is None or read.last_utt_id == after:
                return after
            after = read.last_utt_id

    async def _follow(self, dialog_id: str, user_id: str, chat_id: int, after: str | None) -> None:
        """Send each reply stored after ``after`` to the chat, until the dialog is
        returned to the bot (or the agent says it was never handed off)."""
        failures, backoff = 0, FIRST_BACKOFF
        while True:
            params = {"user_id": user_id} | ({"after": after} if after else {})
            seen_handoff = False
            try:
                async with aconnect_sse(
                    self._http,
                    "GET",
                    self._url(dialog_id),
                    params=params,
                    headers=self._headers,
                    timeout=httpx.Timeout(30.0, read=None),
                ) as source:
                    if not source.response.is_success:
                        # 404: not this user's dialog (any more); retrying cannot fix that
                        log.warning(
                            "dialog %s: replies not followed: HTTP %d",
                            dialog_id,
                            source.response.status_code,
                        )
                        return
                    async for event in source.aiter_sse():
                        if event.event == "reply":
                            reply = Delivered.model_validate_json(event.data)
                            await self._send(chat_id, reply.text)
                            after = reply.utt_id
                            self._remember(dialog_id, after)
                        elif event.event == "handoff":
                            seen_handoff = True
                            if HandoffStatus.model_validate_json(event.data).state == "returned":
                                return
                        failures, backoff = 0, FIRST_BACKOFF
                if not seen_handoff:
                    return  # never handed off: nothing to follow
                problem = "the stream ended before the dialog was returned"
            except (httpx.TransportError, SSEError, ValidationError) as exc:
                problem = f"{type(exc).__name__}: {str(exc)[:200]}"
            failures += 1
            if failures > self._retries:
                log.error(
                    "dialog %s: replies not followed after %d tries (%s); the user's next "
                    "message follows it again",
                    dialog_id,
                    failures,
                    problem,
                )
                return
            log.warning("dialog %s: %s; following again in %.1fs", dialog_id, problem, backoff)
            await asyncio.sleep(backoff)  # back-off before following again
            backoff = min(backoff * 2, MAX_BACKOFF)
