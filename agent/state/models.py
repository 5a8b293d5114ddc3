"""Dialogue state, modelled on the Dialogue State page of DeepPavlov Dream.

These are the stored shapes and the API's schema at once: ``GET /api/dialogs/{id}``
returns a :class:`Dialog` exactly as the store holds it. Services never see them whole;
they get a :mod:`agent.sdk.models` view of the last few utterances.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

from agent.sdk.models import JsonDict


def new_id() -> str:
    """A random id that is safe in URLs and in MongoDB ``_id`` fields: a version 4 UUID's
    32 hex digits, made from its 16 random bytes directly: ``uuid.uuid4().hex`` builds a
    ``UUID`` object on the way, which cost more than the bytes (docs/performance.md, "Half
    the CPU")."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()


def utc_now() -> datetime:
    """Timestamps are always aware UTC so both stores round-trip them unchanged."""
    # MongoDB keeps milliseconds: truncate here so a stored date reads back identical.
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class Profile(BaseModel):
    """What is known about the person (Dream keeps it apart from attributes)."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    gender: str | None = None
    birthdate: str | None = None
    location: str | None = None
    timezone: str | None = None


#: The profile's typed fields, each with its type (the rest of the profile is free JSON).
_PROFILE_TYPES = {
    name: (
        TypeAdapter(Any if field.annotation is None else field.annotation),
        str(field.annotation),
    )
    for name, field in Profile.model_fields.items()
}
#: How a refusal names a value's type (JSON's names).
_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def profile_field_problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the profile's field ``key`` (None: it can). Only the typed
    fields are checked; any other key holds any JSON value."""
    typed = _PROFILE_TYPES.get(key)
    if typed is None:
        return None
    adapter, expected = typed
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError:
        got = _JSON_TYPES.get(type(value), type(value).__name__)
        return f"expected {expected}, got {got}"
    return None


class Human(BaseModel):
    """A user; profile and attributes persist across all of that user's dialogs."""

    id: str = Field(default_factory=new_id)
    user_type: Literal["human"] = "human"
    #: The client's user id (``user_id`` at the API), under Dream's name for it.
    user_external_id: str
    attributes: JsonDict = Field(default_factory=dict)
    persona: JsonDict = Field(default_factory=dict)
    profile: Profile = Field(default_factory=Profile)


class Bot(BaseModel):
    """The bot's side of one dialog: its attributes live as long as the dialog."""

    id: str = Field(default_factory=new_id)
    user_type: Literal["bot"] = "bot"
    attributes: JsonDict = Field(default_factory=dict)
    persona: JsonDict = Field(default_factory=dict)


class Hypothesis(BaseModel):
    """A response candidate from one skill; skills may add fields of their own."""

    model_config = ConfigDict(extra="allow")

    skill_name: str
    text: str
    confidence: float
    annotations: JsonDict = Field(default_factory=dict)
    human_attributes: JsonDict = Field(default_factory=dict)
    bot_attributes: JsonDict = Field(default_factory=dict)

    def tokens_used(self) -> int:
        """The tokens the hypothesis says it cost, as OpenAI's ``usage`` puts it
        (``total_tokens``, else prompt plus completion); 0 when it does not say."""
        usage = (self.__pydantic_extra__ or {}).get("usage")
        if not isinstance(usage, dict):
            return 0
        keys = (
            ("total_tokens",) if "total_tokens" in usage else ("prompt_tokens", "completion_tokens")
        )
        counts = [usage.get(key) for key in keys]
        return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool) and c > 0)

    @model_serializer(mode="wrap")
    def _as_returned(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        """``human_attributes`` and ``bot_attributes`` only when the skill sent them: a
        dp-agent skill's hypothesis is stored, shown to formatters and read back by
        dp-agent's tools exactly as the service returned it (dp-agent adds nothing but
        ``skill_name`` and ``annotations``)."""
        data: dict[str, Any] = handler(self)
        for key in _UNSET_LEFT_OUT:
            if key not in self.model_fields_set:
                data.pop(key, None)
        return data


_set = object.__setattr__

#: The fields of a :class:`Hypothesis` written only when the skill sent them.
_UNSET_LEFT_OUT = ("human_attributes", "bot_attributes")


#: ``dropped``: a speculative skill's call given up because a cheaper skill answered
#: confidently first (docs/configuration.md, tiers).
Outcome = Literal["ok", "timeout", "error", "skipped", "dropped"]

#: ``active_skill`` of the answer given when no hypothesis survived.
FALLBACK_SKILL = "fallback_response"

#: Why a service's output is missing: each :class:`agent.connectors.ServiceError` has one,
#: ``skipped`` is a required service having failed before it.
FailureKind = Literal["timeout", "unavailable", "bad_status", "bad_response", "refused", "skipped"]


#: The role of a dp-agent service that nothing (group, tags) says more about.
SERVICES_ROLE = "services"


class ServiceCall(BaseModel):
    """One service's part in a turn: the turn's trace, read by tests and the inspector."""

    service: str
    role: str = Field(
        description="what the service is: annotators, skills... (a Chorus pipeline's "
        "roles); a dp-agent service's as its group and tags tell, else services"
    )
    dream_group: str | None = Field(
        default=None, description="the dp-agent group the pipeline file files it under"
    )
    start: float = Field(description="seconds since the turn's pipeline started")
    duration: float = Field(description="seconds the call took")
    outcome: Outcome
    batch_size: int = 1

    @classmethod
    def made(
        cls,
        service: str,
        role: str,
        dream_group: str | None,
        start: float,
        duration: float,
        outcome: Outcome,
        batch_size: int,
    ) -> ServiceCall:
        """A call the executor recorded itself, every field given with its type: made
        without validating what is already valid, as ``model_construct`` would make it
        but without its walk over the fields. Each turn records one per service
        (docs/performance.md, "Half the CPU")."""
        call = cls.__new__(cls)
        fields = {
            "service": service,
            "role": role,
            "dream_group": dream_group,
            "start": start,
            "duration": duration,
            "outcome": outcome,
            "batch_size": batch_size,
        }
        _set(call, "__dict__", fields)
        _set(call, "__pydantic_fields_set__", set(fields))
        _set(call, "__pydantic_extra__", None)
        _set(call, "__pydantic_private__", None)
        return call


class ServiceFailure(BaseModel):
    """Why a service's output is missing from this turn."""

    service: str
    kind: FailureKind
    message: str


class SkillSelectorDecision(BaseModel):
    """What a skill selector chose this turn, and why: read by the inspector to say why a
    skill did not run."""

    selector: str
    skills: list[str] = Field(description="the skills chosen; empty: every skill ran")
    reason: str | None = None
    decides: list[str] | None = Field(
        default=None, description="the skills it decides about; null: every skill"
    )


class HumanUtterance(BaseModel):
    """What the user said, with everything the pipeline made of it."""

    speaker: Literal["human"] = "human"
    utt_id: str = Field(default_factory=new_id)
    text: str
    user: JsonDict = Field(default_factory=dict, description="the human profile at that time")
    date_time: datetime = Field(default_factory=utc_now)
    attributes: JsonDict = Field(default_factory=dict)
    annotations: JsonDict = Field(default_factory=dict)
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    errors: list[ServiceFailure] = Field(default_factory=list)
    trace: list[ServiceCall] = Field(default_factory=list)
    skill_selection: list[SkillSelectorDecision] = Field(
        default_factory=list, description="each skill selector's decision (older turns: none)"
    )
    message_key: str | None = Field(
        default=None,
        description="the idempotency key the message was answered under (its route and the "
        "client's message id), when the client sent one",
    )
    interrupted: bool = Field(
        default=False,
        description="its turn was cancelled by a later message of the user (double texting "
        "policy interrupt): it has no answer",
    )
    handed_off: bool = Field(
        default=False,
        description="it came while the dialog was handed to a person (waiting or held): "
        "the bot did not answer it, no service saw it (docs/handoff.md)",
    )


class BotUtterance(BaseModel):
    """The answer; ``orig_text`` keeps the chosen hypothesis' text before any rewrite."""

    speaker: Literal["bot"] = "bot"
    utt_id: str = Field(default_factory=new_id)
    text: str
    orig_text: str | None = None
    active_skill: str
    confidence: float
    user: JsonDict = Field(default_factory=dict, description="the bot profile at that time")
    date_time: datetime = Field(default_factory=utc_now)
    attributes: JsonDict = Field(default_factory=dict)
    annotations: JsonDict = Field(default_factory=dict)
    rating: float | None = None
    operator: str | None = Field(
        default=None,
        description="the operator who wrote it while holding the dialog (active_skill "
        "operator); null: the bot's (docs/handoff.md)",
    )


Utterance = Annotated[HumanUtterance | BotUtterance, Field(discriminator="speaker")]

#: The fields a read of a turn's history as shown (``TurnStore.open_turn(whole=False)``)
#: leaves out of each past utterance, which then holds their defaults: the profile snapshot
#: (``user``: the bot's is its whole attributes), and the human's hypotheses, errors,
#: trace and skill selection. A Chorus pipeline's services are shown none of them of a past
#: utterance (:func:`agent.pipeline.views.utterance_view`: hypotheses on the turn's own
#: utterance only), and the turn checks none of them; they are most of a stored
#: utterance's parse (docs/performance.md, "The first token, hop by hop").
NOT_SHOWN = ("user", "hypotheses", "errors", "trace", "skill_selection")


class Dialog(BaseModel):
    """A whole dialog: what ``GET /api/dialogs/{id}`` answers."""

    dialog_id: str = Field(default_factory=new_id)
    channel_type: str = "http_client"
    date_start: datetime = Field(default_factory=utc_now)
    date_finish: datetime | None = None
    rating: float | None = None
    human: Human
    bot: Bot = Field(default_factory=Bot)
    utterances: list[Utterance] = Field(default_factory=list)
    attributes: JsonDict = Field(default_factory=dict)
    dp_agent_id: str | None = Field(
        default=None,
        pattern="^[0-9a-f]{24}$",
        description="the _id dp-agent gave the dialog (one brought by chorus import "
        "--from-dp-agent): dp-agent's dialect shows it, and GET /api/dialogs/{it} finds it",
    )
    arm: str | None = Field(
        default=None,
        description="the experiment arm (CHORUS_EXPERIMENT) whose pipeline answers the "
        "dialog, set when it is opened; null: opened with no experiment",
    )
