"""Bodies of the handoff routes (docs/api.md, "Handing a dialog to a person"): the
operator routes under ``/api/operator`` and what a chat client reads of an operator's
answers. The stored shapes (:class:`~agent.state.handoff.Handoff`, the utterances) are
:mod:`agent.state`'s."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from agent.api.schemas import MessageId
from agent.state.handoff import Handoff, HandoffStatus
from agent.state.models import BotUtterance, Dialog


class InboxEntry(BaseModel):
    """One dialog of an operator's inbox."""

    handoff: Handoff
    channel_type: str
    last_text: str | None = Field(default=None, description="the user's last message, for the list")
    unanswered: int = Field(
        description="the user's messages since the last bot or operator utterance"
    )


class Inbox(BaseModel):
    """``GET /api/operator/dialogs``: the dialogs waiting for a person, then those taken."""

    dialogs: list[InboxEntry]


class OperatorDialog(BaseModel):
    """``GET /api/operator/dialogs/{dialog_id}``: the handoff and the whole dialog as the
    inspector reads it (every utterance with its annotations, hypotheses, trace)."""

    handoff: Handoff
    dialog: Dialog


class OperatorMessage(BaseModel):
    """``POST /api/operator/dialogs/{dialog_id}/messages``: what the operator writes."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"example": {"text": "Hi, I'm Ann. How can I help?"}}
    )

    text: str = Field(min_length=1, description="at most CHORUS_MAX_TEXT_LENGTH characters")
    message_id: MessageId | None = Field(
        default=None,
        description="the operator's (or helpdesk's) id for this message: sent again, it is "
        "stored once and the first answer is returned",
    )


class OperatorMessageReply(BaseModel):
    """The operator's message as stored: a bot utterance marked with the operator."""

    dialog_id: str
    utterance: BotUtterance


class HandoffRequest(BaseModel):
    """``POST /api/dialogs/{dialog_id}/handoff``: ask for a person through the API."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=1000, description="for the operator to read")


class HandoffChange(BaseModel):
    """The answer of a claim, a handback and a request: the handoff as it is now."""

    handoff: Handoff


class Delivered(BaseModel):
    """One bot utterance as a chat client receives it outside a turn's reply (an
    operator's message, the agent taking the dialog back)."""

    utt_id: str
    text: str
    active_skill: str
    operator: str | None = Field(default=None, description="who wrote it; null: the bot")
    date_time: datetime

    @classmethod
    def of(cls, utterance: BotUtterance) -> Delivered:
        return cls(
            utt_id=utterance.utt_id,
            text=utterance.text,
            active_skill=utterance.active_skill,
            operator=utterance.operator,
            date_time=utterance.date_time,
        )


class Replies(BaseModel):
    """``GET /api/chat/dialogs/{dialog_id}/replies``: the bot utterances stored after
    ``after``, and where the dialog's handoff stands, for a client that polls (``POST /``
    clients)."""

    dialog_id: str
    handoff: HandoffStatus | None = Field(
        description="the dialog's handoff; null: it was never handed to a person"
    )
    replies: list[Delivered]
    last_utt_id: str | None = Field(
        description="the id of the dialog's last utterance read: the next poll's ?after="
    )
