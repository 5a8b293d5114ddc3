"""``/chat/ws``: the chat over a WebSocket, as DeepPavlov Agent's chat page speaks it.

dp-agent's protocol, kept as it is so its page and clients work unchanged: the client sends
text frames ``{"user_id": ..., "payload": ..., <attributes>}`` (of at most
``CHORUS_MAX_BODY_BYTES``, as an HTTP body: a larger one closes the socket with 1009); each
is answered, in order,
with the frame ``POST /`` would have answered (``dialog_id``, ``utt_id``, ``user_id``,
``response``, ``active_skill``), and ``/start`` or ``/close`` with the JSON string
``"command_performed"``. A message that cannot be answered (a binary frame among them) gets
``{"status": ..., <the HTTP error's body>}`` and the connection stays open for the next one.

A client that connects with ``?events=true`` follows each turn instead, as the
Server-Sent Events of ``POST /`` do: frames ``{"event": "accepted" | "progress" | "token"
| "answer" | "error", "data": {...}}``, the last of a turn being ``answer`` or ``error``.

While the user's dialog is with a person (docs/handoff.md), a message is stored and not
answered: a plain connection gets no frame for it (``events=true``: ``accepted``, then
``answer`` with an empty ``response`` and ``handoff``). What the operator writes, and what
the bot says when it takes the dialog back, comes as it is stored, on every connection
that carried a message of that dialog: a reply frame (``active_skill`` ``operator`` and
``operator`` naming who wrote it), or with ``events=true`` the events ``reply`` and
``handoff``.

Idempotency keys (``message_id``), the user's queue and ``CHORUS_PROTECT_CHAT`` (the key in
``X-API-Key`` or, for browsers, which cannot set headers on a WebSocket, ``?api_key=``)
behave as on ``POST /``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from agent.api.deps import FlowDep, HandoffsDep, PipelineDep, SettingsDep
from agent.api.errors import too_deep
from agent.api.handoff_schemas import Delivered
from agent.api.routes.chat import agent_reply, checked, kept
from agent.api.schemas import AgentMessage, AgentReply
from agent.api.security import check_chat_key, socket_key
from agent.api.sse import Dump, error_body, follow_turn, followed_turn, started
from agent.flow import Incoming
from agent.handoff import Handoffs
from agent.settings import Settings
from agent.state.handoff import HandoffStatus
from agent.state.models import BotUtterance
from agent.telemetry.turn_events import TurnEvent
from agent.turn.config import Dialect

router = APIRouter()

#: dp-agent's answer to a closing command.
COMMAND_PERFORMED = "command_performed"


@router.websocket("/chat/ws")
async def chat_ws(
    websocket: WebSocket,
    flow: FlowDep,
    settings: SettingsDep,
    pipeline: PipelineDep,
    handoffs: HandoffsDep,
    events: bool = False,
) -> None:
    """Answer each message of the connection in turn; see the module docstring."""
    try:
        check_chat_key(settings, socket_key(websocket))
    except HTTPException as exc:
        await websocket.close(status.WS_1008_POLICY_VIOLATION, reason=str(exc.detail))
        return
    await websocket.accept()
    channel = Channel(websocket, handoffs, pipeline.dialect, events)
    try:
        while True:
            frame = await websocket.receive()
            if frame["type"] == "websocket.disconnect":
                return
            await _answer(channel, flow, settings, frame.get("text"))
    except WebSocketDisconnect:
        return
    finally:
        await channel.aclose()


class Channel:
    """One connection: its frames sent one at a time, and the followers of its dialogs
    that are with a person."""

    def __init__(
        self, websocket: WebSocket, handoffs: Handoffs, shape: Dialect, events: bool
    ) -> None:
        self.websocket = websocket
        self.shape = shape
        self.events = events
        self._handoffs = handoffs
        self._lock = asyncio.Lock()
        self._followers: dict[str, asyncio.Task[None]] = {}
        #: each dialog's last bot utterance this connection sent: a follower starts after
        #: it, so what was said meanwhile (a handoff asked through the API) comes too
        self._last: dict[str, str] = {}

    async def send(self, data: Any) -> None:
        async with self._lock:
            await self.websocket.send_json(data)

    def follow(self, reply: AgentReply) -> None:
        """Follow the reply's dialog while it is with a person, unless already."""
        dialog_id = reply.dialog_id
        if dialog_id is None:
            return
        if reply.utt_id is not None:
            self._last[dialog_id] = reply.utt_id
        if reply.handoff is None or reply.handoff.state == "returned":
            return
        running = self._followers.get(dialog_id)
        if running is not None and not running.done():
            return
        after = self._last.get(dialog_id, reply.follow_after)
        self._followers[dialog_id] = asyncio.get_running_loop().create_task(
            self._follow(dialog_id, reply, after), name="chorus-ws-handoff"
        )

    async def _follow(self, dialog_id: str, reply: AgentReply, after: str | None) -> None:
        """From where the reply left the dialog: what it said, how its handoff changed."""
        known = reply.handoff
        async for seen in self._handoffs.follow(dialog_id, after, known):
            changed = None if seen.handoff is None else seen.handoff.status()
            known = changed or known
            for utterance in seen.utterances:
                if isinstance(utterance, BotUtterance):
                    self._last[dialog_id] = utterance.utt_id
                    await self.send(self._delivered(reply, utterance, known))
            if changed is not None and self.events:
                await self.send({"event": "handoff", "data": changed.model_dump(mode="json")})

    def _delivered(
        self, reply: AgentReply, utterance: BotUtterance, handoff: HandoffStatus | None
    ) -> dict[str, Any]:
        if self.events:
            return {"event": "reply", "data": Delivered.of(utterance).model_dump(mode="json")}
        frame = AgentReply(
            dialog_id=reply.dialog_id,
            utt_id=utterance.utt_id,
            user_id=reply.user_id,
            response=utterance.text,
            active_skill=utterance.active_skill,
            handoff=handoff,
        ).for_dialect(self.shape)
        frame["operator"] = utterance.operator
        return frame

    async def aclose(self) -> None:
        for task in self._followers.values():
            task.cancel()
        for task in self._followers.values():
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task


async def _answer(channel: Channel, flow: FlowDep, settings: Settings, text: str | None) -> None:
    """One message (``text`` None: a binary frame): its reply (or its turn's events), or
    the error that refused it. The channel's ``shape``: the pipeline file's dialect, which
    shapes the reply as ``POST /`` shapes it (dp-agent's has no ``debug_output`` unless
    asked)."""
    websocket, shape, events = channel.websocket, channel.shape, channel.events
    try:
        message = _message(text, settings)
        turn = checked(message, settings, settings.dialect or shape)
        reported, task = followed_turn(flow, turn)
        first = await started(reported, task)
    except Exception as exc:
        refusal = await error_body(websocket, exc)
        await channel.send({"event": "error", "data": refusal} if events else refusal)
        return
    if events:
        if first is not None:
            await channel.send(_frame(first))
        dump = _dumped(message, turn)
        async for event in follow_turn(reported, task, dump, lambda e: error_body(websocket, e)):
            await channel.send(_frame(event))
        if not task.cancelled() and task.exception() is None:
            channel.follow(agent_reply(message, turn, task.result()))
        return
    try:
        answered = agent_reply(message, turn, await task)
    except Exception as exc:
        await channel.send(await error_body(websocket, exc))
        return
    if not kept(answered):  # with a person: the operator's answer comes when written
        closed = answered.active_skill is None and answered.utt_id is None
        await channel.send(COMMAND_PERFORMED if closed else answered.for_dialect(shape))
    channel.follow(answered)


def _message(text: str | None, settings: Settings) -> AgentMessage:
    """The frame as ``POST /``'s body, or the 400 or 422 that says what to fix."""
    if text is None:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            'send each message as a text frame holding a JSON object {"user_id": ..., '
            '"payload": ...}: binary frames are not read',
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            f'send each message as a JSON object {{"user_id": ..., "payload": ...}}: {exc}',
        ) from None
    except RecursionError:
        raise too_deep(settings.limits.max_depth) from None
    try:
        return AgentMessage.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


def _dumped(message: AgentMessage, turn: Incoming) -> Dump:
    """The ``answer`` event's data: the flow's answer shaped as ``POST /``'s reply."""
    return lambda answer: agent_reply(message, turn, answer).model_dump(mode="json")


def _frame(event: TurnEvent) -> dict[str, Any]:
    return {"event": event.name, "data": event.data}
