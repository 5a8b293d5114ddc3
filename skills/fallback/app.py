"""The last chance: a safe answer with a low confidence, so any real answer wins over it.

When the badwords annotator flagged the user's utterance as toxic
(``annotations["badwords"]["toxic"]``), the rule-based skill selector routes the turn to
this skill alone; it then answers a calm, de-escalating line with a higher confidence (0.3),
so the bot neither echoes the abuse nor pretends it was not there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.sdk import DialogView, Service, SkillHypothesis

ANSWERS = (
    "I'm not sure I follow. Could you tell me a bit more?",
    "Interesting! Tell me more.",
    "Hmm, I don't know much about that. What else is on your mind?",
)
CALM_ANSWERS = (
    "I'd rather keep our conversation friendly. Shall we talk about something else?",
    "Let's keep things kind, please. What else would you like to talk about?",
)
CONFIDENCE = 0.1
CALM_CONFIDENCE = 0.3

service = Service("fallback", description="A safe answer with low confidence.")


def is_toxic(annotations: Mapping[str, Any]) -> bool:
    badwords = annotations.get("badwords")
    return isinstance(badwords, Mapping) and badwords.get("toxic") is True


@service.skill
def last_chance(dialog: DialogView) -> SkillHypothesis:
    # Vary the answer with the dialog's length so the bot does not repeat itself verbatim.
    turn = len(dialog.utterances) // 2
    if is_toxic(dialog.human_utterance.annotations):
        return SkillHypothesis(text=CALM_ANSWERS[turn % len(CALM_ANSWERS)],
                               confidence=CALM_CONFIDENCE)
    return SkillHypothesis(text=ANSWERS[turn % len(ANSWERS)], confidence=CONFIDENCE)


app = service.app
