"""Request and response bodies of the HTTP API (the stored shapes are in agent.state)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from agent.sdk.models import check_attribute_keys


def _int_as_str(value: Any) -> Any:
    """dp-agent clients (Telegram among them) send numeric user ids; nothing else is coerced,
    so an object such as ``{"$ne": null}`` is refused, never passed into a query."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


#: A client's own id for its user: letters, digits and ``_ . @ : + -``.
ExternalId = Annotated[
    str, BeforeValidator(_int_as_str),
    StringConstraints(pattern=r"^[\w.@:+-]{1,128}$"),
]
#: Ids Chorus makes (hex uuids); the pattern keeps anything else out of queries.
EntityId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class AgentMessage(BaseModel):
    """``POST /``, as DeepPavlov Agent takes it; extra keys become utterance attributes."""

    model_config = ConfigDict(extra="allow",
                              json_schema_extra={"example": {"user_id": "alice",
                                                             "payload": "Hi, I'm Alice"}})

    user_id: ExternalId
    payload: str = Field(min_length=1, description="the user's text")

    def attributes(self) -> dict[str, Any]:
        return check_attribute_keys(dict(self.model_extra or {}))


class AgentReply(BaseModel):
    """The answer to ``POST /``."""

    dialog_id: str | None
    utt_id: str | None
    user_id: str
    response: str
    active_skill: str | None


class DialogRating(BaseModel):
    user_id: ExternalId
    dialog_id: EntityId
    rating: float = Field(ge=-1000, le=1000)


class UtteranceRating(BaseModel):
    user_id: ExternalId
    utt_id: EntityId
    rating: float = Field(ge=-1000, le=1000)


class Ok(BaseModel):
    status: str = "ok"
