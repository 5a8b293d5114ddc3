"""``/api/operator/...``: what an operator (a person, or a helpdesk through its webhook)
does with the dialogs handed to people (docs/handoff.md, docs/api.md).

Every route needs ``X-Operator-Key`` (``CHORUS_OPERATOR_KEY``): the API key never opens
them, and a dialog that is not waiting for or held by a person is a 404 here, whatever it
holds. The routes that change a dialog name the operator in ``X-Operator``; only the one
holding a dialog writes to it or hands it back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, status
from fastapi.responses import StreamingResponse

from agent.api.deps import HandoffsDep, JsonBody, ReaderDep, SettingsDep
from agent.api.handoff_schemas import (
    HandoffChange,
    Inbox,
    InboxEntry,
    OperatorDialog,
    OperatorMessage,
    OperatorMessageReply,
)
from agent.api.request_limits import check_text
from agent.api.routes.dialogs import DialogId
from agent.api.schemas import EntityId
from agent.api.security import OperatorKey
from agent.api.sse import EVENT_STREAM, event_stream, sse_data
from agent.handoff import NotHandedOff
from agent.state.handoff import OperatorName
from agent.state.models import BotUtterance, HumanUtterance

router = APIRouter(prefix="/api/operator", tags=["operator"], dependencies=[OperatorKey])

#: The operator acting, as the request names them.
Operator = Annotated[
    OperatorName,
    Header(
        alias="X-Operator",
        description="the operator's name (letters, digits, . @ + - _; up to 64): who "
        "claims, writes, hands back",
    ),
]
#: The most dialogs one inbox read lists.
INBOX_CAP = 500


@router.get("/dialogs", response_model=Inbox)
async def inbox(
    handoffs: HandoffsDep,
    store: ReaderDep,
    limit: Annotated[int, Query(ge=1, le=INBOX_CAP)] = 100,
) -> Inbox:
    """The dialogs waiting for a person (the longest waiting first), then those held."""
    entries = []
    for handoff in await handoffs.inbox(limit=limit):
        dialog = await store.dialog(handoff.dialog_id)
        if dialog is None:
            continue
        unanswered, last_text = 0, None
        for utterance in reversed(dialog.utterances):
            if isinstance(utterance, BotUtterance):
                break
            unanswered += 1
            last_text = last_text if last_text is not None else utterance.text
        if last_text is None:
            last_text = next(
                (u.text for u in reversed(dialog.utterances) if isinstance(u, HumanUtterance)),
                None,
            )
        entries.append(
            InboxEntry(
                handoff=handoff,
                channel_type=dialog.channel_type,
                last_text=last_text,
                unanswered=unanswered,
            )
        )
    return Inbox(dialogs=entries)


@router.get("/dialogs/{dialog_id}", response_model=OperatorDialog)
async def read(dialog_id: DialogId, handoffs: HandoffsDep, store: ReaderDep) -> OperatorDialog:
    """The handoff and the whole dialog, every turn as the inspector shows it."""
    handoff = await handoffs.current(dialog_id)
    dialog = await store.dialog(dialog_id)
    if dialog is None:
        raise NotHandedOff(dialog_id)
    return OperatorDialog(handoff=handoff, dialog=dialog)


@router.post("/dialogs/{dialog_id}/claim", response_model=HandoffChange)
async def claim(dialog_id: DialogId, operator: Operator, handoffs: HandoffsDep) -> HandoffChange:
    """Take a waiting dialog: of two operators claiming at once, one gets it and the other
    a 409 naming who holds it. Claiming one's own again answers it unchanged."""
    return HandoffChange(handoff=await handoffs.claim(dialog_id, operator))


@router.post(
    "/dialogs/{dialog_id}/messages",
    dependencies=[JsonBody],
    response_model=OperatorMessageReply,
    status_code=status.HTTP_201_CREATED,
)
async def write(
    dialog_id: DialogId,
    body: OperatorMessage,
    operator: Operator,
    handoffs: HandoffsDep,
    settings: SettingsDep,
) -> OperatorMessageReply:
    """Say something to the user of a dialog this operator holds: stored as a bot
    utterance marked with the operator, and delivered on the user's channel."""
    check_text(body.text, settings.max_text_length, "text")
    utterance = await handoffs.write(dialog_id, operator, body.text, body.message_id)
    return OperatorMessageReply(dialog_id=dialog_id, utterance=utterance)


@router.post("/dialogs/{dialog_id}/handback", response_model=HandoffChange)
async def hand_back(
    dialog_id: DialogId, operator: Operator, handoffs: HandoffsDep
) -> HandoffChange:
    """Give the dialog back to the bot, which answers the user's next message with the
    whole history. The operator holding it may, and any operator may decline one still
    waiting."""
    return HandoffChange(handoff=await handoffs.hand_back(dialog_id, operator, "operator"))


@router.get(
    "/dialogs/{dialog_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {EVENT_STREAM: {}}, "description": "Server-Sent Events"}},
)
async def follow(
    dialog_id: DialogId,
    handoffs: HandoffsDep,
    request: Request,
    after: Annotated[
        EntityId | None,
        Query(description="the last utterance the operator has; unset: from the dialog's start"),
    ] = None,
) -> StreamingResponse:
    """The dialog live, as Server-Sent Events: ``utterance`` (each utterance stored after
    ``after``, the user's and the operator's, in order) and ``handoff`` (the handoff each
    time it changes; the stream ends after the one that returns the dialog to the bot)."""
    handoff = await handoffs.current(dialog_id)

    async def events() -> AsyncIterator[bytes]:
        yield sse_data("handoff", handoff.model_dump(mode="json"))
        async for seen in handoffs.follow(dialog_id, after, handoff.status()):
            for utterance in seen.utterances:
                yield sse_data("utterance", utterance.model_dump(mode="json"))
            if seen.handoff is not None:
                yield sse_data("handoff", seen.handoff.model_dump(mode="json"))
            if await request.is_disconnected():
                return

    return event_stream(events())
