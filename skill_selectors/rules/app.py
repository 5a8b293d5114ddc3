"""Skill selector: which skills run this turn, decided by the rules in ``rules.json``.

Running only the skills an utterance calls for saves their calls and keeps off-topic
candidates away from the response selector. Whenever the rules have nothing sure to say
(no confident intent, an intent without a rule, an annotator that failed) the answer is
``[]``, which the agent reads as "run every skill": a skill just added to the pipeline then
answers without anyone touching the rules, and a broken annotator never silences the bot.

Reads, on the newest human utterance, ``annotations["badwords"]`` (``{"toxic": bool, ...}``)
and ``annotations["intents"]`` (``{"intent": str | null, "confidence": float, ...}``), and
``human.attributes["greeting_stage"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from agent.sdk import DialogView, Service

RULES_FILE = Path(__file__).parent / "rules.json"

#: The greeting skill waits for the user's name across turns; while it does
#: (``greeting_stage == "asked_name"``) it runs whatever intent the answer looks like.
GREETING_SKILL = "greeting"
GREETING_STAGE_KEY = "greeting_stage"
GREETING_WAITING = "asked_name"

SkillName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
#: A rule naming no skill would read as "run every skill", the opposite of what was meant.
SkillNames = Annotated[list[SkillName], Field(min_length=1)]


class Rules(BaseModel):
    """The data file. Unknown keys are refused, so a misspelt key fails at start-up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    always: list[SkillName] = Field(
        default_factory=list, description="added to every intent rule's skills")
    on_toxic: SkillNames = Field(description="the only skills run for a toxic utterance")
    intents: dict[SkillName, SkillNames] = Field(description="intent name -> skills to run")
    min_intent_confidence: float = Field(
        ge=0.0, le=1.0, description="below it the intent is ignored and every skill runs")


class RulesError(ValueError):
    """The rules file is not usable; the message names the file and the bad key."""


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or '(whole file)'}: {error['msg']}"
        for error in exc.errors()
    )


def load_rules(path: Path) -> Rules:
    """Read and check a rules file once, at import: a bad file stops the service starting."""
    try:
        return Rules.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise RulesError(f"{path}: {_describe(exc)}") from None


class Badwords(BaseModel):
    """The part of ``annotations["badwords"]`` the rules read."""

    toxic: bool


class Intent(BaseModel):
    """The part of ``annotations["intents"]`` the rules read."""

    intent: str | None
    confidence: float


AnnotationT = TypeVar("AnnotationT", bound=BaseModel)


def _annotation(annotations: dict[str, Any], name: str,
                model: type[AnnotationT]) -> AnnotationT | None:
    """A failed annotator leaves its slot empty (or, if buggy, malformed): both read as absent."""
    try:
        return model.model_validate(annotations[name])
    except (KeyError, ValidationError):
        return None


def _intent_skills(rules: Rules, intent: Intent | None) -> list[str]:
    """The rule's skills plus ``always`` for a confident intent with a rule; else ``[]``."""
    if intent is None or intent.intent is None:
        return []
    if intent.confidence < rules.min_intent_confidence or intent.intent not in rules.intents:
        return []
    return [*rules.intents[intent.intent], *rules.always]


def select(rules: Rules, annotations: dict[str, Any],
           human_attributes: dict[str, Any]) -> list[str]:
    """The skills to run, in rule order without duplicates; ``[]`` means every skill.

    A toxic utterance gets ``on_toxic`` only, even mid-greeting: the greeting skill would
    otherwise take a lone swear word for the user's name and remember it.
    """
    badwords = _annotation(annotations, "badwords", Badwords)
    if badwords is not None and badwords.toxic:
        return list(dict.fromkeys(rules.on_toxic))
    skills = _intent_skills(rules, _annotation(annotations, "intents", Intent))
    if skills and human_attributes.get(GREETING_STAGE_KEY) == GREETING_WAITING:
        skills.append(GREETING_SKILL)
    return list(dict.fromkeys(skills))


RULES = load_rules(RULES_FILE)

service = Service("rules", description="Chooses the skills to run from intent and "
                  "toxicity annotations, by the rules in rules.json.")


@service.skill_selector
def choose_skills(dialog: DialogView) -> list[str]:
    return select(RULES, dialog.human_utterance.annotations, dialog.human.attributes)


app = service.app
