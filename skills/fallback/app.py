"""The last chance: a safe answer with a low confidence, so any real answer wins over it.

When the badwords annotator flagged the user's utterance as toxic
(``annotations["badwords"]["toxic"]``), the rule-based skill selector routes the turn to
this skill alone; it then answers a calm, de-escalating line with a higher confidence (0.3),
so the bot neither echoes the abuse nor pretends it was not there.

Its ordinary lines come in two sets: for a question it cannot answer ("What is 17 times
23?", and typed without its mark: "how do you say thank you in japanese",
:func:`shared.questions.asks_as_typed`) it says so and offers what it can talk about; for a
statement ("I went hiking yesterday") it invites the user to go on. It picks a line the
bot has not said in the window, varied per dialog (seeded by the dialog id and the
window, so a replay answers the same). Without an LLM a third or more of an ordinary
conversation's turns are the LLM's (bench/data/routing), most of them questions: twelve
lines for them, so that a conversation of twenty turns seldom hears one twice.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from agent.sdk import DialogView, Service, SkillHypothesis
from shared.questions import asks_as_typed

ANSWERS = (
    "I'm not sure I follow. Could you tell me a bit more?",
    "Interesting! Tell me more.",
    "I'm listening. What happened next?",
    "That sounds like a story. How did it go?",
    "I see. And how do you feel about that?",
)
QUESTION_ANSWERS = (
    "Good question, but I don't know the answer to that one. Ask me for a joke, or what I can do.",
    "I'm afraid that's beyond me. We could talk about books, films, food or how I work instead.",
    "I don't know, sorry. Is there something else you'd like to talk about?",
    "That one stumps me. Try asking me about myself, or what Chorus is.",
    "Honestly, I have no idea. I'm better at small talk than at facts like that.",
    "I can't look that up, I'm afraid: I only know what my skills know. Anything else?",
    "No clue, to be honest! Ask me about music, pets or travel instead?",
    "That's outside what I know. Want to hear a fun fact instead?",
    "I wish I knew! Ask me about my favourite films or books, or for a joke.",
    "Sorry, that's not something I can answer. What else is on your mind?",
    "That's beyond my skills, I'm afraid. Want to tell me about your day instead?",
    "I can't help with that one. I'm better at a chat, a joke, or questions about Chorus.",
)
CALM_ANSWERS = (
    "I'd rather keep our conversation friendly. Shall we talk about something else?",
    "Let's keep things kind, please. What else would you like to talk about?",
)
CONFIDENCE = 0.1
CALM_CONFIDENCE = 0.3

service = Service(
    "fallback", description="A safe answer with low confidence.", never_changes_view=True
)


def is_toxic(annotations: Mapping[str, Any]) -> bool:
    badwords = annotations.get("badwords")
    return isinstance(badwords, Mapping) and badwords.get("toxic") is True


#: The bot attribute with the lines this skill said last (kept when its answer is chosen),
#: so a line does not come back once the dialog has moved past the window.
RECENT = "fallback_recent"


def recently_said(dialog: DialogView) -> set[str]:
    kept = dialog.bot.attributes.get(RECENT)
    earlier = {line for line in kept if isinstance(line, str)} if isinstance(kept, list) else set()
    return earlier | {u.text for u in dialog.utterances if u.speaker == "bot"}


def pick(lines: tuple[str, ...], dialog: DialogView) -> str:
    """A line the bot has not said lately (any, once it said them all), chosen with a seed
    of the dialog and its window so consecutive answers differ."""
    said = recently_said(dialog)
    fresh = [line for line in lines if line not in said] or list(lines)
    seed = f"{dialog.dialog_id}:{dialog.human_utterance.utt_id}"
    return random.Random(seed).choice(fresh)


@service.skill
async def last_chance(dialog: DialogView) -> SkillHypothesis:
    human = dialog.human_utterance
    if is_toxic(human.annotations):
        return SkillHypothesis(text=pick(CALM_ANSWERS, dialog), confidence=CALM_CONFIDENCE)
    lines = QUESTION_ANSWERS if asks_as_typed(human.text) else ANSWERS
    text = pick(lines, dialog)
    kept = dialog.bot.attributes.get(RECENT)
    earlier = [line for line in kept if isinstance(line, str)] if isinstance(kept, list) else []
    return SkillHypothesis(
        text=text, confidence=CONFIDENCE, bot_attributes={RECENT: remembered(earlier, text)}
    )


def remembered(earlier: list[str], text: str) -> list[str]:
    """The lines to keep in :data:`RECENT` after saying ``text``: of each set of lines, all
    but one at most (once all were said, the oldest may come back). Counted per set,
    so a run of statements does not push out the questions' lines said before it."""
    kept: list[str] = []
    for line in reversed([*[line for line in earlier if line != text], text]):
        lines = next((s for s in (ANSWERS, QUESTION_ANSWERS, CALM_ANSWERS) if line in s), None)
        if lines is not None and sum(said in lines for said in kept) < len(lines) - 1:
            kept.append(line)
    return kept[::-1]


app = service.app
