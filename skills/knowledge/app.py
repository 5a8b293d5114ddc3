"""Answers from the knowledge base, extractively: the best sentences of the best passage
and where they come from ("From docs/backup.md, Restoring: ...").

Reads the retrieval annotator's passages (``annotations["retrieval"]`` on the newest human
utterance) and answers only when the best one's ``confidence`` (the probability that it
answers the question, :mod:`shared.knowledge.retrieval`) reaches :data:`THRESHOLD`; below
it the skill is silent and another skill answers. The hypothesis' confidence is that
probability, so it competes fairly with the other skills' and, as a cheap answer, keeps a
tiered LLM from running when it is sure (docs/configuration.md, "Tiers"). An utterance the
intents annotator reads as small talk ("how are you?") is left to the skills for it.

The sentences quoted are the passage's closest to the question: pysbd splits the passage
into sentences, each is scored by the question's words it holds and its meaning's
cosine, and the best :data:`MAX_SENTENCES` are quoted in their order in the passage. The
hypothesis carries ``citations`` (the passage's source, section and link), which the agent
copies into the reply's attributes and /chat shows as a link.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import ValidationError

from agent.sdk import DialogView, Service, SkillHypothesis
from shared.knowledge.index import embed_texts, terms
from shared.knowledge.retrieval import Retrieved, RetrievedPassage

#: The least probability of fitting that still answers. A wrong answer costs more than
#: silence (another skill, or the LLM, answers then): at 0.6 the skill declined 92 % of
#: the question set's questions the docs do not answer and answered 82 % of the others,
#: 84 % of those from the right page (bench/knowledge.py, docs/performance.md).
THRESHOLD = 0.6
#: The most the skill claims: a passage that quotes the very words ("Tell me a joke" is one
#: of the README's examples) is sure to match them, not to be what the user wants, and a
#: scripted skill sure of its own case (a joke asked for, 0.85; a greeting, 0.9) answers it.
MAX_CONFIDENCE = 0.8
#: The intents annotator's conversational intents ("how are you?", "hi", "thanks") are
#: small talk's to answer, however many of their words the docs hold ("How are you?" is in
#: the README's examples): at this confidence the skill leaves them alone.
INTENT_CONFIDENCE = 0.5
#: Sentences quoted from the passage.
MAX_SENTENCES = 2
#: The most characters quoted; a longer sentence is cut at a word.
MAX_CHARS = 400


@cache
def _segmenter() -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def sentences(text: str) -> list[str]:
    """The passage's sentences, each paragraph on its own (a list item is a sentence)."""
    found: list[str] = []
    for paragraph in text.split("\n\n"):
        found.extend(s.strip() for s in _segmenter().segment(paragraph) if s.strip())
    return found


def best_sentences(question: str, passage: str) -> str:
    """The :data:`MAX_SENTENCES` sentences of ``passage`` closest to ``question``, in order."""
    candidates = sentences(passage)
    if not candidates:
        return passage[:MAX_CHARS]
    wanted = set(terms(question))
    cosines = embed_texts(candidates) @ embed_texts([question])[0]
    scores = [
        (len(wanted & set(terms(s))) / len(wanted) if wanted else 0.0) + float(c)
        for s, c in zip(candidates, cosines, strict=True)
    ]
    chosen = sorted(sorted(range(len(candidates)), key=lambda i: -scores[i])[:MAX_SENTENCES])
    quote = " ".join(candidates[i] for i in chosen)
    if len(quote) > MAX_CHARS:
        quote = quote[:MAX_CHARS].rsplit(" ", 1)[0] + " …"
    return quote


def citation(number: int, passage: RetrievedPassage) -> dict[str, Any]:
    """One cited source, as the reply's ``citations`` attribute lists it."""
    return {
        "n": number,
        "source": passage.source,
        "section": passage.section,
        "headings": passage.headings,
        "link": passage.link,
    }


def retrieved(dialog: DialogView) -> Retrieved | None:
    """The retrieval annotation of the newest human utterance, if there is a valid one."""
    found = dialog.human_utterance.annotations.get("retrieval")
    if not isinstance(found, dict):
        return None
    try:
        return Retrieved.model_validate(found)
    except ValidationError:
        return None


def small_talk(dialog: DialogView) -> bool:
    """Whether the intents annotator heard a conversational intent."""
    intent = dialog.human_utterance.annotations.get("intents")
    if not isinstance(intent, dict) or not intent.get("intent"):
        return False
    level = intent.get("confidence")
    return isinstance(level, int | float) and level >= INTENT_CONFIDENCE


def answer(dialog: DialogView) -> SkillHypothesis | None:
    """The extractive answer, or None when retrieval is not confident enough or the
    utterance is small talk."""
    if small_talk(dialog):
        return None
    found = retrieved(dialog)
    if found is None or not found.passages:
        return None
    best = found.passages[0]
    if best.confidence < THRESHOLD:
        return None
    where = f"{best.source}, {best.section}" if best.section else best.source
    quote = best_sentences(dialog.human_utterance.text, best.text)
    return SkillHypothesis(
        text=f"From {where}: {quote}",
        confidence=min(best.confidence, MAX_CONFIDENCE),
        citations=[citation(1, best)],
    )


service = Service("knowledge", description="Answers from the knowledge base, citing it.")


@service.skill
def knowledge(dialog: DialogView) -> list[SkillHypothesis]:
    # Synchronous: embedding the passage's sentences is CPU work (the SDK's worker thread).
    hypothesis = answer(dialog)
    return [hypothesis] if hypothesis else []


app = service.app
