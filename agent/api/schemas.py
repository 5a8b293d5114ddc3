"""Request and response bodies of the HTTP API (the stored shapes are in agent.state)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi.exceptions import RequestValidationError
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
    model_validator,
)

from agent.parlai.scores import TurnScores
from agent.sdk.models import check_attribute_keys
from agent.state.handoff import HandoffStatus
from agent.turn.config import Dialect


def _int_as_str(value: Any) -> Any:
    """dp-agent clients (Telegram among them) send numeric user ids; nothing else is coerced,
    so an object such as ``{"$ne": null}`` is refused, never passed into a query."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _printable(value: str) -> str:
    """Any text a person could read is a user id, as in dp-agent (spaces, slashes, ``+``
    in e-mail addresses); control characters and lone surrogates are not."""
    if not value.isprintable():
        raise ValueError("a user id must be printable text (no control characters)")
    return value


#: The most characters a user id is parsed with: past it a request is refused before
#: anything else. The limit itself (``StorageLimits.max_user_id_length``, which code may
#: set up to this) is checked by :func:`agent.api.request_limits.check_user_id`.
USER_ID_CAP = 4096

#: A client's own id for its user: any printable text (a number is taken as its digits).
ExternalId = Annotated[
    str,
    BeforeValidator(_int_as_str),
    StringConstraints(min_length=1, max_length=USER_ID_CAP),
    AfterValidator(_printable),
]
#: The shape of a client's id for one message (``message_id`` or the ``Idempotency-Key``
#: header).
MESSAGE_ID_PATTERN = r"^[\w.:-]{1,128}$"
#: A client's id for one message.
MessageId = Annotated[str, StringConstraints(pattern=MESSAGE_ID_PATTERN)]
#: Ids Chorus makes (hex uuids); the pattern keeps anything else out of queries.
EntityId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class AgentMessage(BaseModel):
    """``POST /``, as DeepPavlov Agent takes it; extra keys become utterance attributes."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"example": {"user_id": "alice", "payload": "Hi, I'm Alice"}},
    )

    user_id: ExternalId
    payload: str | None = Field(
        default=None,
        description="the user's text; empty for a message that is only attachments (an "
        "`image`, as dp-agent's Telegram channel sends a photo without a caption). "
        "Required, but in the dp-agent dialect (a dp-agent pipeline file, or "
        "`CHORUS_DIALECT=dp-agent`), which takes a missing one as empty, as dp-agent does",
    )
    message_id: MessageId | None = Field(
        default=None,
        description="the client's id for this message: a retry with the same id is answered once",
    )

    #: the client sent ``user_id`` as a number (dp-agent answers it as one)
    _numeric_user_id: bool = PrivateAttr(default=False)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_id_type(cls, data: Any, handler: Any) -> Any:
        message = handler(data)
        user_id = data.get("user_id") if isinstance(data, dict) else None
        message._numeric_user_id = isinstance(user_id, int) and not isinstance(user_id, bool)
        return message

    def attributes(self) -> dict[str, Any]:
        return check_attribute_keys(dict(self.model_extra or {}))

    def text(self, dialect: Dialect) -> str:
        """The user's text: a missing ``payload`` is empty in dp-agent's dialect (its
        handler reads ``payload`` with ``""`` as the default), and the 422 every other
        missing field gets in Chorus's."""
        if self.payload is not None:
            return self.payload
        if dialect == "dp-agent":
            return ""
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body", "payload"), "msg": "Field required"}]
        )

    def reply_user_id(self) -> str | int:
        """The user id as the client sent it."""
        return int(self.user_id) if self._numeric_user_id else self.user_id


class AgentReply(BaseModel):
    """The answer to ``POST /``."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "dialog_id": "5f...",
                "utt_id": "9c...",
                "user_id": "alice",
                "response": "Hi Alice!",
                "active_skill": "greeting",
            }
        }
    )

    dialog_id: str | None
    utt_id: str | None
    user_id: str | int = Field(description="as the client sent it: a number stays a number")
    response: str
    active_skill: str | None
    attributes: dict[str, Any] = Field(
        default_factory=dict,
        description="the bot utterance's attributes, as dp-agent answers them (its Telegram "
        "channel reads an image to send from them)",
    )
    debug_output: dict[str, Any] | None = Field(
        default=None,
        description="the turn's hypotheses and annotations, when the message "
        'carried "debug_output": true (as dp-agent\'s debug clients send); on a dp-agent '
        "pipeline file left out otherwise, as dp-agent leaves it out",
    )

    handoff: HandoffStatus | None = Field(
        default=None,
        description="present only when the dialog is handed to a person (docs/handoff.md): "
        "waiting, held by an operator (then this message was stored, not answered: "
        "response is empty and the status 202), or returned to the bot by this reply",
    )

    #: the utterance after which a channel follows the dialog while it is with a person:
    #: this reply's bot utterance, or the human one kept unanswered
    _follow_after: str | None = PrivateAttr(default=None)

    def following(self, after: str | None) -> AgentReply:
        """This reply, marked with where a channel follows its dialog from."""
        self._follow_after = after
        return self

    @property
    def follow_after(self) -> str | None:
        return self._follow_after

    @model_serializer(mode="wrap")
    def _handoff_when_set(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        """``handoff`` only when there is one: every other reply keeps dp-agent's shape."""
        data: dict[str, Any] = handler(self)
        if self.handoff is None:
            data.pop("handoff", None)
        return data

    def for_dialect(self, dialect: Dialect) -> dict[str, Any]:
        """The reply as JSON in the shape ``dialect``'s clients read: dp-agent's has no
        ``debug_output`` unless it was asked for."""
        leave_out = (
            {"debug_output"} if dialect == "dp-agent" and self.debug_output is None else set()
        )
        return self.model_dump(mode="json", exclude=leave_out)


#: A rating as dp-agent takes it: any JSON value ("good", 5, {"stars": 4}).
RatingValue = Annotated[
    Any,
    Field(
        description="any JSON value; a number from -1000 to 1000 "
        "also sets the numeric rating when user_id is the owner's"
    ),
]
#: A dialog's id as the client knows it: Chorus's (dp-agent's ``dialog_id``) or the
#: 24-hex ``_id`` dp-agent shows.
DialogRef = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class DialogRating(BaseModel):
    """``POST /rating/dialog``, as dp-agent takes it: ``user_id`` may be left out."""

    user_id: ExternalId | None = Field(default=None, description="who rates (kept with it)")
    dialog_id: DialogRef
    rating: RatingValue


class UtteranceRating(BaseModel):
    """``POST /rating/utterance``, as dp-agent takes it: ``user_id`` may be left out."""

    user_id: ExternalId | None = Field(default=None, description="who rates (kept with it)")
    utt_id: EntityId
    rating: RatingValue


class Ok(BaseModel):
    status: str = "ok"


class Observation(BaseModel):
    """``POST /api/v1/chat``: a ParlAI observation from a user.

    ``labels`` sent in a live chat are moved to ``eval_labels`` before storage, so they
    never feed skills; extended fields are kept as the utterance's attributes.
    """

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "example": {
                "user_id": "alice",
                "text": "What is winona afraid of?",
                "eval_labels": ["sheep"],
                "label_candidates": ["wolf", "mouse", "cat", "sheep"],
                "episode_done": False,
            }
        },
    )

    user_id: ExternalId
    text: str = Field(min_length=1)
    id: str | None = Field(default=None, max_length=256, description="the sender's id")
    labels: list[str] | None = Field(default=None, max_length=100)
    eval_labels: list[str] | None = Field(default=None, max_length=100)
    label_candidates: list[str] | None = Field(default=None, max_length=1000)
    episode_done: bool = False
    reward: float | None = Field(default=None, ge=-1e6, le=1e6)
    image: str | None = Field(default=None, description="an http(s) URL or base64 data")
    message_id: MessageId | None = Field(
        default=None,
        description="the client's id for this message: a retry with the same id is answered once",
    )

    def attributes(self) -> dict[str, Any]:
        """What is stored with the utterance: every field but user_id and text."""
        stored = self.model_dump(
            exclude={"user_id", "text", "labels", "message_id"}, exclude_none=True
        )
        stored.update(check_attribute_keys(dict(self.model_extra or {})))
        if self.labels and not self.eval_labels:
            stored["eval_labels"] = list(self.labels)
        stored.pop("episode_done", None)
        return stored


class Act(BaseModel):
    """The bot's answer as a ParlAI act."""

    text: str
    id: str = Field(description="the active skill")
    text_candidates: list[str] = Field(description="every surviving hypothesis, best first")
    episode_done: bool
    dialog_id: str
    utt_id: str
    metrics: TurnScores | None = Field(
        default=None,
        description="the turn's scores (exact match, F1, hits@k, MRR), when "
        "the observation carried eval_labels",
    )
