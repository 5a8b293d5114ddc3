"""What crosses the wire between the agent and its services.

A service sees a :class:`DialogView` per dialog: the last ``context_window`` utterances and
the profiles' attributes, never the whole history. It answers with one item per dialog,
whose shape depends on its role (annotator: any JSON; skill: :class:`SkillHypothesis` list;
skill selector: skill names or a :class:`SkillSelection`; response selector:
:class:`Selection`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

JsonDict = dict[str, Any]

#: Attribute keys become MongoDB field paths: a dot or a leading ``$`` would address
#: something other than the key itself, so they are refused at the boundary.
_FORBIDDEN_KEY_START = "$"
_FORBIDDEN_KEY_CHARS = (".", '"', "\x00")
_FORBIDDEN_KEY = re.compile("[" + re.escape("".join(_FORBIDDEN_KEY_CHARS)) + "]")


def check_attribute_keys(attributes: JsonDict) -> JsonDict:
    """Refuse keys that could escape the attributes slot once stored."""
    for key in attributes:
        if not key or key.startswith(_FORBIDDEN_KEY_START) or _FORBIDDEN_KEY.search(key):
            raise ValueError(
                f"attribute key {key!r} is not allowed: keys must be non-empty and "
                "contain no '.', '\"' or leading '$'"
            )
    return attributes


class HypothesisView(BaseModel):
    """A candidate as candidate annotators and response selectors see it."""

    model_config = ConfigDict(extra="allow")

    skill_name: str
    text: str
    confidence: float
    annotations: JsonDict = Field(default_factory=dict)


class UtteranceView(BaseModel):
    """One utterance of the window; ``hypotheses`` is filled only on the latest human one."""

    speaker: Literal["human", "bot"]
    utt_id: str
    text: str
    annotations: JsonDict = Field(default_factory=dict)
    attributes: JsonDict = Field(default_factory=dict)
    hypotheses: list[HypothesisView] = Field(default_factory=list)
    active_skill: str | None = None
    image: str | None = None


class HumanView(BaseModel):
    """The user, as far as a service needs them: their remembered attributes and profile."""

    id: str
    attributes: JsonDict = Field(default_factory=dict)
    profile: JsonDict = Field(default_factory=dict)


class BotView(BaseModel):
    """The bot of this dialog: its attributes and persona."""

    id: str
    attributes: JsonDict = Field(default_factory=dict)
    persona: JsonDict = Field(default_factory=dict)


class DialogView(BaseModel):
    """A service's window onto one dialog."""

    dialog_id: str
    utterances: list[UtteranceView]
    human: HumanView
    bot: BotView
    #: Left out of the JSON when there is no budget: a service that checks its request
    #: strictly sees the same view as before budgets existed. (``exclude_if`` keeps the
    #: whole dump in pydantic's core; a wrap serializer went through Python on every call.)
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        exclude_if=lambda tokens: tokens is None,
        description="the most tokens an LLM skill may spend on this call: what is left of "
        "its token budget in the pipeline file (none: no budget)",
    )

    @property
    def last_utterance(self) -> UtteranceView:
        """The utterance the service is asked about (the newest in the window)."""
        if not self.utterances:
            raise ValueError("the dialog view holds no utterance")
        return self.utterances[-1]

    @property
    def human_utterance(self) -> UtteranceView:
        """The newest human utterance: what the user just said."""
        for utterance in reversed(self.utterances):
            if utterance.speaker == "human":
                return utterance
        raise ValueError("the dialog view holds no human utterance")

    @property
    def bot_utterance(self) -> UtteranceView | None:
        """The newest bot utterance in the window: what the bot said last, which the user's
        utterance may be answering ("Mostly reading" after "What do you do for fun?");
        None when the bot has not spoken in it."""
        for utterance in reversed(self.utterances):
            if utterance.speaker == "bot":
                return utterance
        return None


class ServiceRequest(BaseModel):
    """One HTTP POST from the agent: a batch of dialogs."""

    dialogs: list[DialogView] = Field(min_length=1, max_length=1024)


class SkillHypothesis(BaseModel):
    """What a skill proposes; only ``human_attributes``/``bot_attributes`` can touch state.

    Extra fields are kept on the stored hypothesis (Dream skills add their own).
    """

    model_config = ConfigDict(extra="allow")

    text: str = Field(min_length=1)
    confidence: float = Field(ge=0.0, le=1.0)
    human_attributes: JsonDict = Field(default_factory=dict)
    bot_attributes: JsonDict = Field(default_factory=dict)

    _check_keys = field_validator("human_attributes", "bot_attributes")(check_attribute_keys)


class SkillSelection(BaseModel):
    """A skill selector's choice: the skills to run, why, and which skills it decides about.

    ``skills`` empty means "run every skill". ``decides`` names the skills the selector has
    rules for: a skill outside it runs whatever was chosen, so a skill just added to the
    pipeline answers before anyone writes a rule for it. ``None`` (or a bare list of names
    as the answer) means the selector decides about every skill.
    """

    skills: list[str] = Field(default_factory=list)
    reason: str | None = None
    decides: list[str] | None = None


class Selection(BaseModel):
    """A response selector's choice: the index of the hypothesis, and why."""

    index: int = Field(ge=0)
    reason: str | None = None
