"""A skill that streams its text: the wire format between such a skill and the agent.

A skill written as an async generator (``yield StreamStart(confidence=0.8)``, then the
text in pieces as ``str``, and maybe a last :class:`StreamEnd`) is answered two ways by
the SDK. Called as every service is, it answers the usual JSON list, the pieces joined
into one hypothesis. Called with ``Accept: application/x-ndjson`` and one dialog, it
answers a chunked stream of JSON lines, one object each, in this order:

    {"start": {"confidence": 0.8, ...}}        the hypothesis' fields but its text
    {"token": "Hel"}                           a piece of the text, as soon as it is made
    {"token": "lo!"}
    {"end": [{"text": "Hello!", "confidence": 0.8, ...}]}

``end`` holds exactly the list the JSON answer would have held, so what the agent stores
does not depend on how the skill was called. A failure after the first line is an
``{"error": "..."}`` line and the end of the stream (the status, 200, is sent by then); a
failure before it is an HTTP error status, as for any call. A skill that yields nothing
answers ``{"end": []}``.

The agent reads the lines as they come (:func:`parse_line`) and forwards the tokens to the
client when the skill's answer is certain to be chosen (docs/services.md).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.sdk.models import JsonDict, check_attribute_keys

#: The media type of a streamed answer, and what the agent's ``Accept`` asks for.
STREAM_MEDIA_TYPE = "application/x-ndjson"

#: A streamed answer's lines: their key, and what they carry.
LineKey = Literal["start", "token", "end", "error"]


class StreamStart(BaseModel):
    """A streaming skill's first yield: its hypothesis' fields except the text, which
    follows in pieces. Extra fields are kept on the hypothesis, as on
    :class:`~agent.sdk.models.SkillHypothesis`."""

    model_config = ConfigDict(extra="allow")

    confidence: float = Field(ge=0.0, le=1.0)
    human_attributes: JsonDict = Field(default_factory=dict)
    bot_attributes: JsonDict = Field(default_factory=dict)

    _check_keys = field_validator("human_attributes", "bot_attributes")(check_attribute_keys)


class StreamEnd(BaseModel):
    """A streaming skill's optional last yield: hypothesis fields known only once the text
    is written, such as an LLM's token ``usage`` (OpenAI's ``{"prompt_tokens": ...,
    "completion_tokens": ..., "total_tokens": ...}``), which the agent counts against the
    skill's token budget. They are merged into the ``end`` line's hypothesis."""

    model_config = ConfigDict(extra="allow")


def line(key: LineKey, value: Any) -> bytes:
    """One line of a streamed answer."""
    return json.dumps({key: value}, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def parse_line(raw: bytes) -> tuple[LineKey, Any]:
    """A line read back; :class:`ValueError` saying what is wrong with it otherwise."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"a streamed line is not JSON: {exc}") from None
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("a streamed line must be an object with one key")
    ((key, value),) = data.items()
    if key not in ("start", "token", "end", "error"):
        raise ValueError(f"unknown streamed line {key!r}: expected start, token, end or error")
    if key in ("token", "error") and not isinstance(value, str):
        raise ValueError(f"a streamed {key} must be a string")
    return key, value
