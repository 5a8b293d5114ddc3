"""Sentence segmentation and tokens of the newest utterance.

Output (under ``annotations["tokens"]``): ``{"sentences": [...], "tokens": [...]}``.
Skills use it instead of splitting text themselves.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel

from agent.sdk import DialogView, Service

#: Annotations kept, by text: chat repeats itself ("hi", "thanks", "ok"), and a repeated
#: text is annotated again for nothing (docs/performance.md, "Half the CPU").
KEPT = 1024
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*|[^\w\s]")  # don't, don\u2019t


class Tokens(BaseModel):
    sentences: list[str]
    tokens: list[str]


@lru_cache(maxsize=KEPT)
def segment(text: str) -> Tokens:
    sentences = [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    return Tokens(sentences=sentences, tokens=_TOKEN.findall(text))


service = Service(
    "tokens", description="Sentence segmentation and tokens.", never_changes_view=True
)


@service.annotator
async def annotate(dialog: DialogView) -> Tokens:
    return segment(dialog.last_utterance.text)


app = service.app
