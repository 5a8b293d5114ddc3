"""Bad words in the newest utterance: profanity and insults from a shipped word list.

Output (under ``annotations["badwords"]``)::

    {"toxic": true, "words": ["idiot", "shut up"]}

``words`` are the entries of ``badwords.txt`` found (lowercase, each once, in order of
appearance); ``toxic`` is whether there are any. A word list is blunt (no sense of
context or irony) but predictable, instant and explainable: a skill or selector can see
exactly which word tripped it. The matching rules are in :mod:`shared.lexicon`.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel

from agent.sdk import DialogView, Service
from shared.lexicon import BADWORDS_FILE, Lexicon

#: Annotations kept, by text: chat repeats itself ("hi", "thanks", "ok"), and a repeated
#: text is annotated again for nothing (docs/performance.md, "Half the CPU").
KEPT = 1024
LEXICON = Lexicon.from_file(BADWORDS_FILE)


class BadWords(BaseModel):
    toxic: bool
    words: list[str]


@lru_cache(maxsize=KEPT)
def check(text: str) -> BadWords:
    words = LEXICON.find(text)
    return BadWords(toxic=bool(words), words=words)


service = Service(
    "badwords",
    description="Profanity and insults in the newest utterance.",
    never_changes_view=True,
)


@service.annotator
async def annotate(dialog: DialogView) -> BadWords:
    return check(dialog.last_utterance.text)


app = service.app
