"""``POST /``: DeepPavlov Agent's chat endpoint, so its clients work unchanged.

FastAPI describes the route (its body, parameters and answers in the OpenAPI document) and
answers every request that is not plain: one that fails a check, or has a body or a
parameter to refuse. A plain one, nearly every turn, is taken by :class:`LeanChatRoute`:
its body parsed and checked once by ``AgentMessage``'s own validator, its answer written
once by ``AgentReply``'s serializer, or followed as the turn's events when it asks for
them (``Accept: text/event-stream``, as the chat page, ``chorus chat`` and streaming
clients ask; docs/performance.md, "Half the CPU")."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Depends, Request, status
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from agent.api.chat_turn import incoming
from agent.api.composition import Components
from agent.api.deps import DoubleTextingQuery, IdempotencyHeader, components_of, is_json
from agent.api.schemas import MESSAGE_ID_PATTERN, AgentMessage, AgentReply
from agent.api.security import ChatParts, chat_gate, holds_key
from agent.api.sse import stream_turn, wants_events
from agent.flow import CLOSED, Answer, Incoming
from agent.settings import Settings
from agent.turn.config import Dialect, DoubleTexting

#: An ``Idempotency-Key`` the lean path takes as it is: the header's pattern, its ASCII
#: part (anything else, FastAPI checks).
_PLAIN_KEY = re.compile(MESSAGE_ID_PATTERN, re.ASCII)
_POLICIES = frozenset(get_args(DoubleTexting))
#: ``AgentReply`` written straight to JSON bytes, as FastAPI would answer it
REPLY_JSON = AgentReply.__pydantic_serializer__.to_json
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class LeanChatRoute(APIRoute):
    """``POST /`` answered without FastAPI's request machinery when nothing in the request
    needs it: FastAPI solved the route's dependency and parameters, parsed the body to
    Python and validated it again as ``AgentMessage``, then validated the returned reply
    against ``response_model`` and encoded it in two passes, the largest block of the
    agent's own CPU in a turn's profile (docs/performance.md, "Half the CPU"). Whatever
    the plain path would not take as FastAPI takes it goes to FastAPI's own handler, which
    answers it as before (its 401, 403, 415 and 422 bodies included)."""

    def get_route_handler(self) -> Handler:
        full = super().get_route_handler()

        async def handle(request: Request) -> Response:
            answered = await _plain(request)
            return answered if answered is not None else await full(request)

        return handle


router = APIRouter(tags=["chat"], route_class=LeanChatRoute)


async def _plain(request: Request) -> Response | None:
    """The answer to a plain request, or None for FastAPI to take it. Nothing is done
    before every check has passed, so a request handed on is handed on untouched (its
    body, read here, is kept on the request)."""
    try:
        body = await request.body()
    except HTTPException:  # the body over its cap: 413
        raise
    except Exception as exc:  # as FastAPI answers a body it could not read
        raise HTTPException(400, "There was an error parsing the body") from exc
    raw_headers = request.scope["headers"]
    headers = dict(raw_headers)
    if len(headers) != len(raw_headers):  # a header given twice: FastAPI's to read
        return None
    answered = await plain_reply(request, body, headers, components_of(request))
    if isinstance(answered, AgentReply):
        return Response(REPLY_JSON(answered), media_type="application/json")
    return answered


async def plain_reply(
    request: Request, body: bytes, headers: dict[bytes, bytes], components: Components
) -> AgentReply | Response | None:
    """The reply to a plain request whose ``body`` was read (a response for one that asks
    for the turn's events, its turn started), or None when FastAPI must take it;
    ``headers``: the request's, by lowered name (each name once); ``components``: the app's
    parts (:func:`~agent.api.deps.components_of`). Shared by :class:`LeanChatRoute` and the
    app's front (:mod:`agent.api.front`), which answers ``POST /`` before FastAPI's
    layers."""
    content_type = headers.get(b"content-type", b"").decode("latin-1")
    if not body or not is_json(content_type):
        return None
    settings = components.settings
    if settings.protect_chat:
        given = headers.get(b"x-api-key")
        if not holds_key(settings, given.decode("latin-1") if given else None):
            return None
    raw_key = headers.get(b"idempotency-key")
    key = None if raw_key is None else raw_key.decode("latin-1")
    if key is not None and _PLAIN_KEY.fullmatch(key) is None:
        return None
    double_texting: Any = None
    if request.scope["query_string"]:
        double_texting = request.query_params.get("double_texting")
        if double_texting is not None and double_texting not in _POLICIES:
            return None
    try:
        message = AgentMessage.model_validate_json(body)
    except ValidationError:
        return None
    parts = ChatParts(components.flow, settings, components.pipeline)
    return await respond(parts, message, request, key, double_texting)


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
    return await respond(parts, message, request, key, double_texting)


async def respond(
    parts: ChatParts,
    message: AgentMessage,
    request: Request,
    key: str | None,
    double_texting: DoubleTexting | None,
) -> AgentReply | Response:
    """``POST /``'s answer to a checked request, by either path."""
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
