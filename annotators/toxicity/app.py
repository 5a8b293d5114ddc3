"""Toxicity of the skills' candidate answers, before one of them is chosen.

A candidate annotator: the agent calls it once per turn with every hypothesis, and stores
one output per hypothesis under ``hypothesis.annotations["toxicity"]``::

    {"toxic": true, "words": ["idiot"]}

It uses the badwords annotator's list and matcher (:mod:`shared.lexicon`), so what counts as
a bad word is defined once for the user and the bot alike. A response
selector can then skip a toxic candidate, e.g. an LLM or retrieval skill echoing an insult.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel

from agent.sdk import DialogView, HypothesisView, Service
from shared.lexicon import BADWORDS_FILE, Lexicon

#: Notes kept, by text: the cheap skills say the same lines again and again, and a line
#: seen before is checked again for nothing (docs/performance.md, "Half the CPU").
KEPT = 1024
LEXICON = Lexicon.from_file(BADWORDS_FILE)


class Toxicity(BaseModel):
    toxic: bool
    words: list[str]


service = Service(
    "toxicity",
    description="Flags skill hypotheses that contain bad words.",
    never_changes_view=True,
)


@service.candidate_annotator
async def annotate(dialog: DialogView, hypothesis: HypothesisView) -> Toxicity:
    return check(hypothesis.text)


@lru_cache(maxsize=KEPT)
def check(text: str) -> Toxicity:
    words = LEXICON.find(text)
    return Toxicity(toxic=bool(words), words=words)


app = service.app
