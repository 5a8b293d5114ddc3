"""``POST /``: DeepPavlov Agent's chat endpoint, so its clients work unchanged."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, status
from fastapi.responses import JSONResponse, Response

from agent.api.chat_turn import incoming
from agent.api.deps import DoubleTextingQuery, IdempotencyHeader
from agent.api.schemas import AgentMessage, AgentReply
from agent.api.security import ChatParts, chat_gate
from agent.api.sse import stream_turn, wants_events
from agent.flow import CLOSED, Answer, Incoming
from agent.settings import Settings
from agent.turn.config import Dialect, DoubleTexting

router = APIRouter(tags=["chat"])


def checked(
    message: AgentMessage,
    settings: Settings,
    dialect: Dialect,
    key: str | None = None,
    double_texting: DoubleTexting | None = None,
) -> Incoming:
    """``POST /``'s body (also a WebSocket chat frame) as the flow's message, or a 422;
    ``dialect``: whose rules apply (dp-agent's takes a missing ``payload`` as empty)."""
    return incoming(
        settings,
        message,
        endpoint="chat",
        user_id=message.user_id,
        text=message.text(dialect),
        text_field="payload",
        attributes=message.attributes,
        key=key,
        message_id=message.message_id,
        closing_commands=True,
        double_texting=double_texting,
    )


def agent_reply(message: AgentMessage, turn: Incoming, answer: Answer) -> AgentReply:
    """The flow's answer to ``turn`` as dp-agent's reply (also the WebSocket chat's)."""
    handoff = None if answer.handoff is None else answer.handoff.status()
    if answer.kept is not None:  # with a person: stored, not answered (docs/handoff.md)
        return AgentReply(
            dialog_id=answer.dialog_id,
            utt_id=None,
            user_id=message.reply_user_id(),
            response="",
            active_skill=None,
            handoff=handoff,
        ).following(answer.kept)
    if answer.result is None:
        return AgentReply(
            dialog_id=answer.dialog_id,
            utt_id=None,
            user_id=message.reply_user_id(),
            response=CLOSED,
            active_skill=None,
        )
    bot = answer.result.bot_utterance
    debug = bool(turn.attributes.get("debug_output"))
    return AgentReply(
        dialog_id=answer.dialog_id,
        utt_id=bot.utt_id,
        user_id=message.reply_user_id(),
        response=bot.text,
        active_skill=bot.active_skill,
        attributes=dict(bot.attributes),
        debug_output=answer.debug() if debug else None,
        handoff=handoff,
    ).following(bot.utt_id)


def kept(reply: AgentReply) -> bool:
    """Whether the message was stored, not answered: the dialog is with a person."""
    return reply.utt_id is None and reply.handoff is not None


@router.post(
    "/",
    response_model=AgentReply,
    responses={
        200: {
            "description": "the answer; {} to /start and /close with CHORUS_DIALECT=dp-agent "
            "or, unset, on a dp-agent pipeline file"
        },
        202: {
            "description": "the dialog is with a person (docs/handoff.md): the message was "
            "stored, not answered; the operator's answer comes on GET "
            "/api/chat/dialogs/{dialog_id}/replies",
            "model": AgentReply,
        },
    },
)
async def chat(
    parts: Annotated[ChatParts, Depends(chat_gate)],
    message: AgentMessage,
    request: Request,
    key: IdempotencyHeader = None,
    double_texting: DoubleTextingQuery = None,
) -> AgentReply | Response:
    """Send the user's message; get the bot's answer and the skill that gave it.

    With ``Accept: text/event-stream`` the answer is the turn's events (Server-Sent
    Events: ``accepted``, ``progress``, ``token``, then ``answer`` or ``error``).

    ``payload`` ``/start`` or ``/close`` ends the user's open dialog; the next message
    opens a new one.
    """
    flow, settings, pipeline = parts.flow, parts.settings, parts.pipeline
    dialect = settings.dialect or pipeline.dialect
    turn = checked(message, settings, dialect, key, double_texting)
    if wants_events(request):
        return await stream_turn(
            request,
            flow,
            turn,
            lambda answer: agent_reply(message, turn, answer).model_dump(mode="json"),
        )
    answered = agent_reply(message, turn, await flow.reply(turn))
    if kept(answered):
        return JSONResponse(answered.for_dialect(pipeline.dialect), status.HTTP_202_ACCEPTED)
    if answered.utt_id is None and dialect == "dp-agent":
        # dp-agent answers a closing command with an empty object; its clients test for it
        return JSONResponse({})
    if pipeline.dialect == "dp-agent":
        return JSONResponse(answered.for_dialect(pipeline.dialect))
    return answered
