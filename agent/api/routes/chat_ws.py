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

Idempotency keys (``message_id``), the user's queue and ``CHORUS_PROTECT_CHAT`` (the key in
``X-API-Key`` or, for browsers, which cannot set headers on a WebSocket, ``?api_key=``)
behave as on ``POST /``.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketDisconnect, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from agent.api.chat_turn import reply
from agent.api.deps import FlowDep, PipelineDep, SettingsDep
from agent.api.errors import too_deep
from agent.api.events import error_body, follow_turn, started
from agent.api.routes.chat import agent_reply, checked
from agent.api.schemas import AgentMessage, AgentReply
from agent.api.security import check_chat_key, socket_key
from agent.pipeline.config import Dialect
from agent.settings import Settings
from agent.telemetry.events import TurnEvent, TurnEvents

router = APIRouter()

#: dp-agent's answer to a closing command.
COMMAND_PERFORMED = "command_performed"


@router.websocket("/chat/ws")
async def chat_ws(
    websocket: WebSocket,
    flow: FlowDep,
    settings: SettingsDep,
    pipeline: PipelineDep,
    events: bool = False,
) -> None:
    """Answer each message of the connection in turn; see the module docstring."""
    try:
        check_chat_key(settings, socket_key(websocket))
    except HTTPException as exc:
        await websocket.close(status.WS_1008_POLICY_VIOLATION, reason=str(exc.detail))
        return
    await websocket.accept()
    try:
        while True:
            frame = await websocket.receive()
            if frame["type"] == "websocket.disconnect":
                return
            await _answer(websocket, flow, settings, pipeline.dialect, frame.get("text"), events)
    except WebSocketDisconnect:
        return


async def _answer(
    websocket: WebSocket,
    flow: FlowDep,
    settings: Settings,
    shape: Dialect,
    text: str | None,
    events: bool,
) -> None:
    """One message (``text`` None: a binary frame): its reply (or its turn's events), or
    the error that refused it. ``shape``: the pipeline file's dialect, which shapes the
    reply as ``POST /`` shapes it (dp-agent's has no ``debug_output`` unless asked)."""
    followed = TurnEvents()
    try:
        message = _message(text, settings)
        turn = checked(message, settings, settings.dialect or shape)
        task = followed.start(reply(flow, turn, lambda answer: agent_reply(message, turn, answer)))
        first = await started(followed, task)
    except Exception as exc:
        refusal = await error_body(websocket, exc)
        await websocket.send_json({"event": "error", "data": refusal} if events else refusal)
        return
    if events:
        if first is not None:
            await websocket.send_json(_frame(first))
        async for event in follow_turn(followed, task, _dump, lambda e: error_body(websocket, e)):
            await websocket.send_json(_frame(event))
        return
    try:
        answered = await task
    except Exception as exc:
        await websocket.send_json(await error_body(websocket, exc))
        return
    assert isinstance(answered, AgentReply)
    closed = answered.active_skill is None and answered.utt_id is None
    await websocket.send_json(COMMAND_PERFORMED if closed else answered.for_dialect(shape))


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


def _dump(reply: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = reply.model_dump(mode="json")
    return dumped


def _frame(event: TurnEvent) -> dict[str, Any]:
    return {"event": event.kind, "data": event.data}
