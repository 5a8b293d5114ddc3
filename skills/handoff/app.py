"""Asking for a person: when the user says they want a human ("I want to talk to a human",
"can I speak to an agent?", "real person please"), this skill answers with the
hypothesis field ``handoff`` set to why, and a confidence that wins over every other
skill; the agent then hands the dialog to a person and tells the user so in the
pipeline's words (``handoff.announce``, docs/handoff.md). Otherwise it proposes nothing.

The text it answers is what a pipeline without a ``handoff`` section says instead: there
no one would come, so it says that a person cannot be reached here.
"""

from __future__ import annotations

import re

from agent.sdk import DialogView, Service, SkillHypothesis

#: A person asked for: a verb of talking or wanting, then a word for a person (not the bot).
_PERSON = (
    r"(human|person|people|operator|agent|somebody real|someone real|real person"
    r"|representative|manager|support)"
)
_ASKS = re.compile(
    rf"\b(talk|speak|chat|connect|transfer|put)\b.{{0,30}}\b(to|with|me)\b.{{0,20}}\b{_PERSON}\b"
    rf"|\b(want|need|get)\b.{{0,20}}\b(a |an )?{_PERSON}\b"
    rf"|^\s*(a |an )?(real )?{_PERSON}\b.{{0,10}}(please|now|!|$)",
    re.IGNORECASE,
)
#: Ways of saying one does *not* want a person, which the words above would match.
_DECLINES = re.compile(r"\b(don'?t|do not|no need|never)\b.{0,20}\b(want|need|talk|speak)\b", re.I)

#: Over any other skill's: a person asked for is the answer.
CONFIDENCE = 1.0
#: What the hypothesis says; the agent replaces it with ``handoff.announce``.
TEXT = "I can't reach a person from here, sorry; I'll do my best to help myself."
#: Why, for the operator to read.
REASON = "the user asked for a person"

service = Service(
    "handoff",
    description="Hands the dialog to a person when the user asks for one.",
    never_changes_view=True,
)


def asks_for_person(text: str) -> bool:
    """Whether ``text`` asks for a person (and does not decline one)."""
    return bool(_ASKS.search(text)) and not _DECLINES.search(text)


@service.skill
async def ask_for_person(dialog: DialogView) -> list[SkillHypothesis]:
    if not asks_for_person(dialog.human_utterance.text):
        return []
    return [SkillHypothesis(text=TEXT, confidence=CONFIDENCE, handoff=REASON)]


app = service.app
