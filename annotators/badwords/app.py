"""Bad words in the newest utterance: profanity and insults from a shipped word list.

Output (under ``annotations["badwords"]``)::

    {"toxic": true, "words": ["idiot", "shut up"]}

``words`` are the entries of ``badwords.txt`` found (lowercase, each once, in order of
appearance); ``toxic`` is whether there are any. A word list is blunt (no sense of
context or irony) but predictable, instant and explainable: a skill or selector can see
exactly which word tripped it. The matching rules are in :mod:`shared.lexicon`.
"""

from __future__ import annotations

from pydantic import BaseModel

from agent.sdk import DialogView, Service
from shared.lexicon import BADWORDS_FILE, Lexicon

LEXICON = Lexicon.from_file(BADWORDS_FILE)


class BadWords(BaseModel):
    toxic: bool
    words: list[str]


def check(text: str) -> BadWords:
    words = LEXICON.find(text)
    return BadWords(toxic=bool(words), words=words)


service = Service("badwords", description="Profanity and insults in the newest utterance.")


@service.annotator
async def annotate(dialog: DialogView) -> BadWords:
    return check(dialog.last_utterance.text)


app = service.app
