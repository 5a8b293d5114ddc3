"""The last chance: a safe answer with a low confidence, so any real answer wins over it."""

from __future__ import annotations

from agent.sdk import DialogView, Service, SkillHypothesis

ANSWERS = (
    "I'm not sure I follow. Could you tell me a bit more?",
    "Interesting! Tell me more.",
    "Hmm, I don't know much about that. What else is on your mind?",
)

service = Service("fallback", description="A safe answer with low confidence.")


@service.skill
def last_chance(dialog: DialogView) -> SkillHypothesis:
    # Vary the answer with the dialog's length so the bot does not repeat itself verbatim.
    answer = ANSWERS[len(dialog.utterances) // 2 % len(ANSWERS)]
    return SkillHypothesis(text=answer, confidence=0.1)


app = service.app
