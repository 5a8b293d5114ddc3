"""A scripted greeting: says hello, asks the user's name, and uses it later.

The skill keeps nothing: where the script stands (``greeting_stage``) and the user's
``name`` travel in the human attributes, which the agent merges only when this skill's
answer is the one chosen.
"""

from __future__ import annotations

import re

from agent.sdk import DialogView, Service, SkillHypothesis

_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening)|howdy)\b", re.I)
_NAME = re.compile(
    r"\b(?:my name is|my name's|i am|i'm|im|call me|it's|this is)\s+([A-Za-zÀ-ÿ'-]{2,30})",
    re.I,
)
_ASK_NAME = re.compile(r"\b(what'?s|what is|do you (know|remember)) my name\b", re.I)
_NOT_NAMES = {"fine", "good", "ok", "okay", "well", "great", "not", "here", "back", "so", "very"}


def extract_name(text: str, *, bare_word_ok: bool) -> str | None:
    """'My name is Ann', "I'm Ann" or, right after we asked, just 'Ann'."""
    match = _NAME.search(text)
    candidate = match.group(1) if match else None
    if candidate is None and bare_word_ok:
        words = re.findall(r"[A-Za-zÀ-ÿ'-]{2,30}", text)
        candidate = words[0] if len(words) == 1 else None
    if candidate is None or candidate.lower() in _NOT_NAMES:
        return None
    return candidate[0].upper() + candidate[1:]


def respond(text: str, attributes: dict[str, object]) -> SkillHypothesis | None:
    stage = attributes.get("greeting_stage")
    name = attributes.get("name")
    if stage == "asked_name":
        found = extract_name(text, bare_word_ok=True)
        if found:
            return SkillHypothesis(
                text=f"Nice to meet you, {found}! What would you like to talk about?",
                confidence=0.95,
                human_attributes={"name": found, "greeting_stage": "done"},
            )
    found = extract_name(text, bare_word_ok=False)
    if found and found != name:
        return SkillHypothesis(text=f"Nice to meet you, {found}!", confidence=0.9,
                               human_attributes={"name": found, "greeting_stage": "done"})
    if _ASK_NAME.search(text):
        if name:
            return SkillHypothesis(text=f"Your name is {name}.", confidence=0.95)
        return SkillHypothesis(text="I don't know your name yet. What is it?", confidence=0.9,
                               human_attributes={"greeting_stage": "asked_name"})
    if _GREETING.search(text):
        if name:
            return SkillHypothesis(text=f"Hello again, {name}!", confidence=0.9)
        return SkillHypothesis(text="Hi! I'm Chorus. What's your name?", confidence=0.9,
                               human_attributes={"greeting_stage": "asked_name"})
    return None


service = Service("greeting", description="Greets, asks the user's name, remembers it.")


@service.skill
def greet(dialog: DialogView) -> list[SkillHypothesis]:
    hypothesis = respond(dialog.human_utterance.text, dialog.human.attributes)
    return [hypothesis] if hypothesis else []


app = service.app
