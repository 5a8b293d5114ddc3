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

from agent.api.deps import FlowDep, SettingsDep
from agent.api.errors import too_deep
from agent.api.events import error_body, follow_turn, started
from agent.api.limits import attributes_or_422, check_text, check_user_id
from agent.api.routes.chat import message_key, reply_shape
from agent.api.schemas import AgentMessage, AgentReply
from agent.api.security import check_reader_key
from agent.flow import MessageFlow
from agent.settings import Settings
from agent.telemetry.events import TurnEvent, TurnEvents

router = APIRouter()

#: dp-agent's answer to a closing command.
COMMAND_PERFORMED = "command_performed"


@router.websocket("/chat/ws")
async def chat_ws(
    websocket: WebSocket, flow: FlowDep, settings: SettingsDep, events: bool = False
) -> None:
    """Answer each message of the connection in turn; see the module docstring."""
    if settings.protect_chat:
        key = websocket.headers.get("x-api-key") or websocket.query_params.get("api_key")
        try:
            check_reader_key(settings, key)
        except HTTPException as exc:
            await websocket.close(status.WS_1008_POLICY_VIOLATION, reason=str(exc.detail))
            return
    await websocket.accept()
    try:
        while True:
            frame = await websocket.receive()
            if frame["type"] == "websocket.disconnect":
                return
            await _answer(websocket, flow, settings, frame.get("text"), events)
    except WebSocketDisconnect:
        return


async def _answer(
    websocket: WebSocket, flow: FlowDep, settings: Settings, text: str | None, events: bool
) -> None:
    """One message (``text`` None: a binary frame): its reply (or its turn's events), or
    the error that refused it."""
    turn = TurnEvents()
    try:
        message, attributes = _message(text, settings)
        work = _reply(flow, message, attributes)
        task = turn.start(work)
        first = await started(turn, task)
    except Exception as exc:
        refusal = await error_body(websocket, exc)
        await websocket.send_json({"event": "error", "data": refusal} if events else refusal)
        return
    if events:
        if first is not None:
            await websocket.send_json(_frame(first))
        async for event in follow_turn(turn, task, _dump, lambda e: error_body(websocket, e)):
            await websocket.send_json(_frame(event))
        return
    try:
        reply = await task
    except Exception as exc:
        await websocket.send_json(await error_body(websocket, exc))
        return
    assert isinstance(reply, AgentReply)
    closed = reply.active_skill is None and reply.utt_id is None
    await websocket.send_json(COMMAND_PERFORMED if closed else _dump(reply))


def _message(text: str | None, settings: Settings) -> tuple[AgentMessage, dict[str, Any]]:
    """The frame as ``POST /``'s body, checked as that route checks it."""
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
        message = AgentMessage.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None
    check_user_id(message.user_id, settings.limits.max_user_id_length)
    check_text(message.payload, settings.max_text_length, "payload")
    return message, attributes_or_422(
        message.attributes, settings.limits.for_client(settings.max_body_bytes)
    )


async def _reply(flow: MessageFlow, message: AgentMessage, attributes: dict[str, Any]) -> Any:
    return await flow.reply(
        message.user_id,
        message.payload,
        attributes,
        key=message_key(message, None),
        request=message,
        shape=reply_shape(message, attributes),
        reply_type=AgentReply,
        closing_commands=True,
    )


def _dump(reply: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = reply.model_dump(mode="json")
    return dumped


def _frame(event: TurnEvent) -> dict[str, Any]:
    return {"event": event.kind, "data": event.data}
