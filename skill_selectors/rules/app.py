"""Skill selector: which skills run this turn, decided by the rules in ``rules.json``.

Running only the skills an utterance calls for saves their calls and keeps off-topic
candidates away from the response selector. Whenever the rules have nothing sure to say
(no confident intent, an intent without a rule, an annotator that failed) no skill is
chosen, which the agent reads as "run every skill", so a broken annotator never silences
the bot.

The rules apply only to the skills they name: the answer's ``decides`` lists them, and a
skill of the pipeline that no rule names runs whatever the rules chose, so a skill just
added answers before anyone writes a rule for it. Only ``on_toxic`` decides about every
skill: a toxic utterance reaches its skills and no other. Each answer carries its
``reason`` ("intent thanks (0.95) → smalltalk, fallback"), which the agent stores with the
turn and the inspector shows beside each skill that did not run.

Reads, on the newest human utterance, ``annotations["badwords"]`` (``{"toxic": bool, ...}``)
and ``annotations["intents"]`` (``{"intent": str | null, "confidence": float, ...}``), and
``human.attributes["greeting_stage"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from agent.sdk import DialogView, Service, SkillSelection

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
        default_factory=list, description="added to every intent rule's skills"
    )
    on_toxic: SkillNames = Field(description="the only skills run for a toxic utterance")
    intents: dict[SkillName, SkillNames] = Field(description="intent name -> skills to run")
    min_intent_confidence: float = Field(
        ge=0.0, le=1.0, description="below it the intent is ignored and every skill runs"
    )

    def named(self) -> list[str]:
        """Every skill some rule names: the skills these rules decide about."""
        names = [
            *self.always,
            *self.on_toxic,
            *(skill for skills in self.intents.values() for skill in skills),
        ]
        return list(dict.fromkeys(names))


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
    #: other intents the utterance also has ("hi, how are you?": a greeting too)
    also: list[str] = Field(default_factory=list)


AnnotationT = TypeVar("AnnotationT", bound=BaseModel)


def _annotation(
    annotations: dict[str, Any], name: str, model: type[AnnotationT]
) -> AnnotationT | None:
    """A failed annotator leaves its slot empty (or, if buggy, malformed): both read as absent."""
    try:
        return model.model_validate(annotations[name])
    except (KeyError, ValidationError):
        return None


def _intent_skills(rules: Rules, intent: Intent | None) -> tuple[list[str], str]:
    """The rule's skills plus ``always`` for a confident intent with a rule (else none),
    and why."""
    if intent is None:
        return [], "no intents annotation: every skill runs"
    if intent.intent is None:
        return [], "no intent recognised: every skill runs"
    if intent.confidence < rules.min_intent_confidence:
        return [], (
            f"intent {intent.intent} ({intent.confidence:.2f}) is below "
            f"{rules.min_intent_confidence:.2f}: every skill runs"
        )
    if intent.intent not in rules.intents:
        return [], f"no rule for intent {intent.intent}: every skill runs"
    # an intent the utterance also has brings its skills: "hi, how are you?" is the
    # greeting's as well as small talk's
    also = [name for name in intent.also if name in rules.intents and name != intent.intent]
    named = [skill for name in [intent.intent, *also] for skill in rules.intents[name]]
    skills = list(dict.fromkeys([*named, *rules.always]))
    shown = " + ".join([intent.intent, *also])
    return skills, f"intent {shown} ({intent.confidence:.2f}) → {', '.join(skills)}"


def select(
    rules: Rules, annotations: dict[str, Any], human_attributes: dict[str, Any]
) -> SkillSelection:
    """The skills to run, in rule order without duplicates (none: every skill), and why.

    A toxic utterance gets ``on_toxic`` only, even mid-greeting: the greeting skill would
    otherwise take a lone swear word for the user's name and remember it.
    """
    badwords = _annotation(annotations, "badwords", Badwords)
    if badwords is not None and badwords.toxic:
        skills = list(dict.fromkeys(rules.on_toxic))
        return SkillSelection(
            skills=skills, decides=None, reason=f"toxic utterance → only {', '.join(skills)}"
        )
    skills, reason = _intent_skills(rules, _annotation(annotations, "intents", Intent))
    if (
        skills
        and human_attributes.get(GREETING_STAGE_KEY) == GREETING_WAITING
        and GREETING_SKILL not in skills
    ):
        skills.append(GREETING_SKILL)
        reason += f"; {GREETING_SKILL}: it is waiting for the user's name"
    return SkillSelection(skills=skills, reason=reason, decides=rules.named())


def build_service(rules: Rules) -> Service:
    """The selector service for these rules (the tests build theirs from their own files)."""
    service = Service(
        "rules",
        description="Chooses the skills to run from intent and "
        "toxicity annotations, by the rules in rules.json.",
        never_changes_view=True,
    )

    @service.skill_selector
    async def choose_skills(dialog: DialogView) -> SkillSelection:
        return select(rules, dialog.human_utterance.annotations, dialog.human.attributes)

    return service


RULES = load_rules(RULES_FILE)
service = build_service(RULES)
app = service.app
