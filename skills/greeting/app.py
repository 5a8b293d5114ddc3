"""A scripted greeting: says hello, asks the user's name, and uses it later.

The skill keeps nothing: where the script stands (``greeting_stage``) and the user's
``name`` travel in the human attributes, which the agent merges only when this skill's
answer is the one chosen.
"""

from __future__ import annotations

import re

from agent.sdk import DialogView, Service, SkillHypothesis

_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening)|howdy)\b", re.I)
_WORD = r"([A-Za-zÀ-ÿ'-]{2,30})"
#: Phrases that can only introduce a name: they also change a name already known.
_SAYS_NAME = re.compile(rf"\b(?:my name is|my name's|call me|you can call me)\s+{_WORD}", re.I)
#: Phrases that introduce a name or anything else ("I'm from Berlin", "I'm feeling sad"):
#: a name only when one word ends the clause (see :func:`extract_name`).
_MAYBE_NAME = re.compile(
    rf"(?:^|[.!?,;]\s*|\b(?:and|hi|hello|hey)\s+)"
    rf"(?:i am|i'm|im|it's|this is)\s+{_WORD}\s*(?=$|[.!?,;]|and\b)",
    re.I,
)
_ASK_NAME = re.compile(r"\b(what'?s|what is|do you (know|remember)) my name\b", re.I)
#: Words that answer "how are you" rather than "who are you" ("I'm fine", "I'm good").
_NOT_NAMES = {
    "fine",
    "good",
    "ok",
    "okay",
    "well",
    "great",
    "not",
    "here",
    "back",
    "so",
    "very",
    "alright",
    "bored",
    "busy",
    "tired",
    "sad",
    "happy",
    "sorry",
    "ready",
    "done",
    "sure",
    "home",
    "awesome",
    "cool",
    "excellent",
    "bad",
    "glad",
    "hungry",
    "sick",
}


def _name(word: str) -> str | None:
    if word.lower() in _NOT_NAMES:
        return None
    return word[0].upper() + word[1:]


def extract_name(text: str, *, bare_word_ok: bool, name_known: bool = False) -> str | None:
    """The name the user gives, if they give one.

    "My name is Ann" and "call me Ann" always do. "I'm Ann" does only while no name is
    known, when "Ann" ends the clause ("I'm from Berlin", "I'm feeling sad" do not) and is
    capitalised, or right after the bot asked (``bare_word_ok``, when a bare "Ann" does too).
    """
    text = text.replace("\u2019", "'").strip()
    says = _SAYS_NAME.search(text)
    if says:
        return _name(says.group(1))
    if name_known:
        return None
    maybe = _MAYBE_NAME.search(text)
    if maybe and (bare_word_ok or maybe.group(1)[0].isupper()):
        return _name(maybe.group(1))
    if bare_word_ok:
        words = re.findall(r"[A-Za-zÀ-ÿ'-]{2,30}|\S+", text.rstrip(".!"))
        if len(words) == 1 and re.fullmatch(_WORD, words[0]):
            return _name(words[0])
    return None


def respond(text: str, attributes: dict[str, object]) -> SkillHypothesis | None:
    stage = attributes.get("greeting_stage")
    name = attributes.get("name")
    if stage == "asked_name":
        found = extract_name(text, bare_word_ok=True, name_known=bool(name))
        if found:
            return SkillHypothesis(
                text=f"Nice to meet you, {found}! What would you like to talk about?",
                confidence=0.95,
                human_attributes={"name": found, "greeting_stage": "done"},
            )
    found = extract_name(text, bare_word_ok=False, name_known=bool(name))
    if found and found != name:
        return SkillHypothesis(
            text=f"Nice to meet you, {found}!",
            confidence=0.9,
            human_attributes={"name": found, "greeting_stage": "done"},
        )
    if _ASK_NAME.search(text):
        if name:
            return SkillHypothesis(text=f"Your name is {name}.", confidence=0.95)
        return SkillHypothesis(
            text="I don't know your name yet. What is it?",
            confidence=0.9,
            human_attributes={"greeting_stage": "asked_name"},
        )
    if _GREETING.search(text):
        if name:
            return SkillHypothesis(text=f"Hello again, {name}!", confidence=0.9)
        return SkillHypothesis(
            text="Hi! I'm Chorus. What's your name?",
            confidence=0.9,
            human_attributes={"greeting_stage": "asked_name"},
        )
    return None


service = Service("greeting", description="Greets, asks the user's name, remembers it.")


@service.skill
def greet(dialog: DialogView) -> list[SkillHypothesis]:
    hypothesis = respond(dialog.human_utterance.text, dialog.human.attributes)
    return [hypothesis] if hypothesis else []


app = service.app
