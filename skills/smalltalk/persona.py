"""Who the bot is in small talk: the persona (name, description, home, likes, hobbies,
favourite things, the templates of its lines and its everyday topics), read from the shipped
``persona.json`` and customised per bot from its attributes or ``bot.persona``."""

from __future__ import annotations

import logging
import string
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError, to_json

from agent.sdk import BotView
from skills.smalltalk.topics import TopicSpec

logger = logging.getLogger(__name__)

PERSONA_FILE = Path(__file__).parent / "persona.json"

#: Placeholders a template may use.
PLACEHOLDERS = frozenset({"name", "description", "lives", "likes", "hobbies", "thing", "favourite"})


def _placeholders_known(template: str) -> str:
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None and field not in PLACEHOLDERS:
            raise ValueError(
                f"unknown placeholder {{{field}}} in {template!r}; "
                f"use {', '.join(sorted(PLACEHOLDERS))}"
            )
    return template


Lines = list[str]


class Templates(BaseModel):
    """The bot's lines per topic; each topic has alternatives so the bot need not repeat."""

    model_config = ConfigDict(extra="forbid")

    how_are_you: Lines = Field(min_length=1)
    doing_well: Lines = Field(min_length=1)
    thanks: Lines = Field(min_length=1)
    farewell: Lines = Field(min_length=1)
    bot_identity: Lines = Field(min_length=1)
    abilities: Lines = Field(min_length=1)
    likes: Lines = Field(min_length=1)
    hobbies: Lines = Field(min_length=1)
    home: Lines = Field(min_length=1)
    favourite: Lines = Field(min_length=1)
    no_favourite: Lines = Field(min_length=1)
    empathy: Lines = Field(min_length=1)
    glad: Lines = Field(min_length=1)
    opinion: Lines = Field(min_length=1)
    user_likes: Lines = Field(min_length=1)
    laughed: Lines = Field(min_length=1)
    about_user: Lines = Field(min_length=1)
    #: a few words the bot does not read, late in a conversation (skills/smalltalk/unread.py)
    unread: Lines = Field(min_length=1)
    #: a short glad reaction to what the bot said ("nice one", "haha brilliant")
    reaction: Lines = Field(min_length=1)
    #: how the user is, in any words, asked back ("tutto bene grazie, and you?")
    asked_back: Lines = Field(min_length=1)
    #: a question about the bot's own life that no topic holds ("do u have a doggy", "you
    #: ever tried kava?"), answered by the turn's reading
    own_life: Lines = Field(min_length=1)

    @field_validator("*")
    @classmethod
    def _known_placeholders(cls, lines: Lines) -> Lines:
        return [_placeholders_known(line) for line in lines]


class Persona(BaseModel):
    """Who the bot is. Extra keys are kept: other skills (the llm one) may read them."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    lives: str = Field(min_length=1)
    likes: list[str] = Field(min_length=1)
    hobbies: list[str] = Field(min_length=1)
    favourites: dict[str, str] = Field(default_factory=dict)
    templates: Templates
    #: Everyday topics the bot has a word on, recognised by meaning (see topics.py).
    topics: dict[str, TopicSpec] = Field(default_factory=dict)


def load_persona(path: Path) -> Persona:
    """Read and validate the persona file; a broken file stops the service at start-up."""
    return Persona.model_validate_json(path.read_bytes())


FILE_PERSONA = load_persona(PERSONA_FILE)


#: The last personas made by :func:`customised`, by their base and override's JSON.
#: Each keeps its base, so that the base's ``id`` in the key is never another's.
_MADE: OrderedDict[tuple[int, bytes], tuple[Persona, Persona]] = OrderedDict()
#: How many :data:`_MADE` keeps: a deployment's bots share one persona or a few.
MADE_KEPT = 8


def customised(base: Persona, override: Mapping[str, Any]) -> Persona:
    """``base`` with the keys of ``override`` replacing its own, templates and topics one
    by one.

    Once small talk has stored the persona in the bot's attributes, every later turn comes
    here with it, and making the persona again (its dumps, and each template's
    placeholders checked) cost more than the rest of the skill's answer together. The
    personas made last are kept by the override's JSON (pydantic's serializer: exact, so
    ``1`` and ``true`` stay apart, and a fraction of the making). The persona kept is
    shared by the calls that find it: the skill only reads it, as it reads
    :data:`FILE_PERSONA`.
    """
    try:
        key = (id(base), to_json(override))
    except PydanticSerializationError:  # not JSON: made, not kept (a bad one raises)
        return _made(base, override)
    kept = _MADE.get(key)
    if kept is not None and kept[0] is base:
        _MADE.move_to_end(key)
        return kept[1]
    persona = _made(base, override)
    _MADE[key] = (base, persona)
    if len(_MADE) > MADE_KEPT:
        _MADE.popitem(last=False)
    return persona


def _made(base: Persona, override: Mapping[str, Any]) -> Persona:
    """The persona :func:`customised` returns, made (a bad override raises)."""
    merged = base.model_dump() | dict(override)
    for key in ("templates", "topics"):
        replaced = override.get(key) or {}
        if not isinstance(replaced, Mapping):
            raise ValueError(f"persona.{key} must be an object")
        merged[key] = base.model_dump()[key] | dict(replaced)
    return Persona.model_validate(merged)


def persona_of(bot: BotView) -> tuple[Persona, bool]:
    """The bot's persona, and whether it must be stored in the bot's attributes.

    The attributes' persona wins, then ``bot.persona``, then the file's. A persona that does
    not validate is logged and left alone (the file's is used, nothing is overwritten).
    """
    stored = bot.attributes.get("persona")
    override = stored or bot.persona
    if not override:
        return FILE_PERSONA, True
    if not isinstance(override, Mapping):
        logger.warning("bot %s: persona is not an object; using persona.json", bot.id)
        return FILE_PERSONA, False
    try:
        return customised(FILE_PERSONA, override), not stored
    except (ValidationError, ValueError) as exc:
        logger.warning("bot %s: invalid persona (%s); using persona.json", bot.id, exc)
        return FILE_PERSONA, False
