"""The handoff routes that are not an operator's (docs/handoff.md):

* ``POST`` / ``DELETE /api/dialogs/{dialog_id}/handoff``: a client of the API (``X-API-Key``)
  hands a dialog to a person, or gives it back to the bot;
* ``GET /api/chat/dialogs/{dialog_id}/replies``: a chat client (the chat endpoints' key
  rule) reads what was said to its user outside a turn's reply, an operator's messages
  above all: polled as JSON (``?after=``), or followed as Server-Sent Events. This is how
  a ``POST /`` client, the /chat page and ``chorus telegram`` receive an operator's words.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Request, status
from fastapi.responses import StreamingResponse

from agent.api.deps import HandoffsDep, HandoffStoreDep, JsonBody, ReaderDep
from agent.api.handoff_schemas import Delivered, HandoffChange, HandoffRequest, Replies
from agent.api.routes.dialogs import DialogId
from agent.api.schemas import EntityId, ExternalId
from agent.api.security import ChatKey, ReaderKey
from agent.api.sse import EVENT_STREAM, event_stream, sse_data, wants_events
from agent.handoff import Handoffs, NotHandedOff
from agent.state.handoff import Handoff
from agent.state.models import BotUtterance

router = APIRouter(tags=["handoff"])

#: Bot utterances one read of the replies returns at most.
REPLIES_CAP = 100


@router.post(
    "/api/dialogs/{dialog_id}/handoff",
    dependencies=[ReaderKey, JsonBody],
    response_model=HandoffChange,
    status_code=status.HTTP_201_CREATED,
)
async def request_handoff(
    dialog_id: DialogId, body: HandoffRequest, handoffs: HandoffsDep
) -> HandoffChange:
    """Hand an open dialog to a person: the user is told so in the pipeline's words
    (``handoff.announce``), and the bot answers nothing until it is given back. 409 when
    it is handed off already, or handoffs are off."""
    return HandoffChange(handoff=await handoffs.request(dialog_id, body.reason))


@router.delete(
    "/api/dialogs/{dialog_id}/handoff", dependencies=[ReaderKey], response_model=HandoffChange
)
async def give_back(dialog_id: DialogId, handoffs: HandoffsDep) -> HandoffChange:
    """Give a handed-off dialog back to the bot, whoever holds it."""
    return HandoffChange(handoff=await handoffs.hand_back(dialog_id, None, "api"))


@router.get(
    "/api/chat/dialogs/{dialog_id}/replies",
    dependencies=[ChatKey],
    response_model=Replies,
    responses={200: {"content": {EVENT_STREAM: {}}}},
)
async def replies(
    dialog_id: DialogId,
    user_id: Annotated[ExternalId, Query(description="the dialog's user, as POST / sent it")],
    handoffs: HandoffsDep,
    store: HandoffStoreDep,
    reader: ReaderDep,
    request: Request,
    after: Annotated[
        EntityId | None,
        Query(
            description="the last utterance the client has (a reply's utt_id, or the last "
            "read's last_utt_id); unset: the whole dialog"
        ),
    ] = None,
) -> Replies | StreamingResponse:
    """The bot utterances stored after ``after`` (an operator's messages, the bot taking
    the dialog back) and the dialog's handoff. With ``Accept: text/event-stream``, they
    are followed live instead: ``reply`` events, then ``handoff`` when it changes, until
    the dialog is back with the bot. 404 unless the dialog is ``user_id``'s."""
    handoff = await store.handoff(dialog_id)
    if handoff is None or handoff.user_id != user_id:  # never handed off: whose is it?
        dialog = await reader.dialog(dialog_id)
        if dialog is None or dialog.human.user_external_id != user_id:
            raise NotHandedOff(dialog_id)
    if wants_events(request):
        return _stream(handoffs, dialog_id, after, handoff, request)
    utterances = await store.utterances_after(dialog_id, after, limit=REPLIES_CAP)
    if utterances is None:
        raise NotHandedOff(dialog_id)
    return Replies(
        dialog_id=dialog_id,
        handoff=None if handoff is None else handoff.status(),
        replies=[Delivered.of(u) for u in utterances if isinstance(u, BotUtterance)],
        last_utt_id=utterances[-1].utt_id if utterances else after,
    )


def _stream(
    handoffs: Handoffs,
    dialog_id: str,
    after: str | None,
    known: Handoff | None,
    request: Request,
) -> StreamingResponse:
    """The replies as Server-Sent Events, until the dialog is back with the bot."""

    async def events() -> AsyncIterator[bytes]:
        if known is not None:
            yield sse_data("handoff", known.status().model_dump(mode="json"))
        if known is None or not known.active:
            return
        async for seen in handoffs.follow(dialog_id, after, known.status()):
            for utterance in seen.utterances:
                if isinstance(utterance, BotUtterance):
                    yield sse_data("reply", Delivered.of(utterance).model_dump(mode="json"))
            if seen.handoff is not None:
                yield sse_data("handoff", seen.handoff.status().model_dump(mode="json"))
            if await request.is_disconnected():
                return

    return event_stream(events())
