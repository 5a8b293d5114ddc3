"""``POST /``: DeepPavlov Agent's chat endpoint, so its clients work unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from agent.api.deps import (
    DoubleTextingPolicy,
    FlowDep,
    IdempotencyKey,
    JsonBody,
    PipelineDep,
    SettingsDep,
)
from agent.api.events import stream_turn, wants_events
from agent.api.limits import attributes_or_422, check_text, check_user_id
from agent.api.schemas import AgentMessage, AgentReply
from agent.api.security import ChatKey
from agent.flow import CLOSED, Answer

router = APIRouter(tags=["chat"])


def reply_shape(
    message: AgentMessage, attributes: dict[str, Any]
) -> Callable[[Answer], AgentReply]:
    """How the flow's answer becomes dp-agent's reply (also the WebSocket chat's)."""

    def shape(answer: Answer) -> AgentReply:
        if answer.result is None:
            return AgentReply(
                dialog_id=answer.dialog_id,
                utt_id=None,
                user_id=message.reply_user_id(),
                response=CLOSED,
                active_skill=None,
            )
        bot = answer.result.bot_utterance
        return AgentReply(
            dialog_id=answer.dialog_id,
            utt_id=bot.utt_id,
            user_id=message.reply_user_id(),
            response=bot.text,
            active_skill=bot.active_skill,
            attributes=dict(bot.attributes),
            debug_output=answer.debug() if attributes.get("debug_output") else None,
        )

    return shape


def message_key(message: AgentMessage, key: str | None) -> str | None:
    """The idempotency key a chat message is answered once by."""
    chosen = key or message.message_id
    return f"chat:{chosen}" if chosen else None


@router.post(
    "/",
    dependencies=[ChatKey, JsonBody],
    response_model=AgentReply,
    responses={
        200: {
            "description": "the answer; {} to /start and /close with CHORUS_DIALECT=dp-agent "
            "or, unset, on a dp-agent pipeline file"
        }
    },
)
async def chat(
    message: AgentMessage,
    flow: FlowDep,
    settings: SettingsDep,
    key: IdempotencyKey,
    double_texting: DoubleTextingPolicy,
    request: Request,
    pipeline: PipelineDep,
) -> AgentReply | Response:
    """Send the user's message; get the bot's answer and the skill that gave it.

    With ``Accept: text/event-stream`` the answer is the turn's events (Server-Sent
    Events: ``accepted``, ``progress``, ``token``, then ``answer`` or ``error``).

    ``payload`` ``/start`` or ``/close`` ends the user's open dialog; the next message
    opens a new one.
    """
    check_user_id(message.user_id, settings.limits.max_user_id_length)
    check_text(message.payload, settings.max_text_length, "payload")
    attributes = attributes_or_422(
        message.attributes, settings.limits.for_client(settings.max_body_bytes)
    )

    shape = reply_shape(message, attributes)
    work = flow.reply(
        message.user_id,
        message.payload,
        attributes,
        key=message_key(message, key),
        request=message,
        shape=shape,
        reply_type=AgentReply,
        closing_commands=True,
        double_texting=double_texting,
    )
    if wants_events(request):
        return await stream_turn(request, work)
    reply = await work
    dialect = settings.dialect or pipeline.dialect
    if reply.utt_id is None and dialect == "dp-agent":
        # dp-agent answers a closing command with an empty object; its clients test for it
        return JSONResponse({})
    if pipeline.dialect == "dp-agent":
        return JSONResponse(reply.for_dialect(pipeline.dialect))
    return reply
