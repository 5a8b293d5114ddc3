"""Answers from the knowledge base, extractively: the best sentences of the best passage
and where they come from ("From docs/backup.md, Restoring: ...").

Reads the retrieval annotator's passages (``annotations["retrieval"]`` on the newest human
utterance) and answers only when the best one's ``confidence`` (the probability that it
answers the question, :mod:`shared.knowledge.retrieval`) reaches :data:`THRESHOLD`; below
it the skill is silent and another skill answers. That probability is the passage's
chance of answering a question about the docs; a conversation holds other turns too ("guess"
after the name question, "are you alive?"), so the hypothesis' confidence is the raw
probability calibrated like every other skill's (:mod:`shared.calibration`, answer type
``passage``): the share of such answers that fitted their turn on the labelled dev
conversations. So it competes fairly with the other skills' and, as a cheap answer, keeps a
tiered LLM from running only when it is likely to fit (docs/turns.md, "How the tiers
decide"); under an even chance it is not given. An utterance the intents annotator reads
as small talk ("how are you?") is left to the skills for it, and so is one that asks
nothing (:func:`shared.asking.asks`: a name, a remark, "add a docstring"), and a
follow-up ("are they noisy?", "who wrote it?") to a question the docs did not answer: the
retrieval annotator searched it with that question, whose subject is not the docs'
(unless that question was about the docs all the same: :data:`FOLLOWED_FROM`).

The sentences quoted are the passage's closest to the question: pysbd splits the passage
into sentences, each is scored by the question's words it holds and its meaning's
cosine, and the best :data:`MAX_SENTENCES` are quoted in their order in the passage. The
hypothesis carries ``citations`` (the passage's source, section and link), which the agent
copies into the reply's attributes and /chat shows as a link.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

from pydantic import ValidationError

from agent.sdk import DialogView, Service, SkillHypothesis
from shared import reading, spelling
from shared.asking import asks, bids_for_work
from shared.calibration import SILENT_BELOW, calibrated, chance, recording
from shared.knowledge.index import embed_texts, terms
from shared.knowledge.retrieval import Retrieved, RetrievedPassage, read_as_asked

#: The least probability of fitting that still answers. A wrong answer costs more than
#: silence (another skill, or the LLM, answers then); what it answers and declines on the
#: question set is measured by bench/knowledge.py (docs/performance.md).
THRESHOLD = 0.6
#: The calibration's name for the skill's one way of answering (shared/calibration.json).
ANSWER_TYPE = "passage"
#: The most the skill claims, after calibration: a passage that quotes the very words
#: ("Tell me a joke" is one of the README's examples) is sure to match them, not to be what
#: the user wants, and a scripted skill sure of its own case (a joke asked for, a greeting)
#: answers it.
MAX_CONFIDENCE = 0.8
#: The least cosine between the question's meaning and the best passage's for a question
#: that is not a follow-up. A conversation's turns that are not about the docs at all
#: (small talk, a film to watch, a general fact) reached a raw 0.74-0.90 on passages that
#: share a word or two with them (the docs quote what users say as examples), with a
#: cosine of 0.06 to 0.23 for five of the knowledge skill's seven wrong cheap answers on
#: the routing dev set; the question set's answered questions of its fitting two thirds
#: sit at 0.18 and up, three of 117 under 0.25 (docs/performance.md, "Knowledge base").
#: A follow-up's cosine is its own words', which say little ("and on SQLite?"), so it is
#: not held to this.
MIN_COSINE = 0.25
#: A follow-up to a question the skill would not have answered is still answered when
#: that question was about the docs, its best passage at least this sure (a docs
#: question whose passage fell short: "how does a response get chosen?" before "is
#: there a Helm chart for it?"), and the follow-up's own words are near its passage
#: (:data:`FOLLOW_UP_COSINE`). A general question's follow-up ("are they noisy?" after
#: heat pumps, "can i freeze it") has a first question the docs know little of, and own
#: words far from the passage its context found.
FOLLOWED_FROM = 0.3
#: The reading of the question before a follow-up (its probability for this skill) from
#: which that question was about the docs, whatever its passage: on the training sets,
#: of the follow-ups the passage's gate had left unanswered, 49 after such a question were
#: labelled for the docs and 22 were not: mostly thanks and requests, which the skill's
#: other gates leave alone, and a few questions of another subject ("How does it compare
#: to Rasa honestly?"), which its threshold and curve weigh (bench/journal/routing.md).
FOLLOWS_DOCS_FROM = 0.5
#: The least cosine of a follow-up's own words with its passage, for
#: :data:`FOLLOWED_FROM`: a little over :data:`MIN_COSINE`, since its passage was found
#: with the question before it.
FOLLOW_UP_COSINE = 0.3
#: The least confidence of a passage answered by the turn's reading where the skill's own
#: gates are silent (:func:`by_reading`): the skill's own :data:`THRESHOLD`, so the
#: reading answers a sure passage far in meaning from the question ("whos behind this
#: bot?"), never an unsure one. From the LLM skill's floor (0.2) up, asked of the shipped
#: bot (``bench.knowledge --served``), such answers cited a right file for 31 of the
#: question set's questions, a wrong one for 21, and answered 17 of its 72 questions the
#: docs do not answer ("How do I configure the NLU pipeline in Rasa's config.yml?"): the
#: turn's reading takes a technical question for the docs' by its shape. A right section
#: is what the routing sets' labels cannot see (bench/journal/routing.md).
READ_PASSAGE_FROM = THRESHOLD
#: Sentences quoted from the passage.
MAX_SENTENCES = 2
#: The most characters quoted; a longer sentence is cut at a word.
MAX_CHARS = 400


@cache
def _segmenter() -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def sentences(text: str) -> list[str]:
    """The passage's sentences, each paragraph on its own (a list item, a table's row is a
    sentence). A sentence ends only where a space follows: pysbd also cuts inside a name
    ("<service>." | "connector.timeout; meaning: seconds per call"), and the pieces it
    cut with no space between are one sentence. A paragraph of prose keeps the line breaks
    of its source, which pysbd takes for the end of a sentence ("... move a deployment
    from SQLite to MongoDB (or back) and" | "copy one user's history elsewhere."): its lines
    are joined first; a code block's lines stay apart, each a command."""
    found: list[str] = []
    for block in text.split("\n\n"):
        paragraph = block if looks_like_code(block) else " ".join(block.split())
        pieces: list[str] = []
        for piece in _segmenter().segment(paragraph):
            if pieces and piece[:1].strip() and pieces[-1][-1:].strip():
                pieces[-1] += piece
            else:
                pieces.append(piece)
        found.extend(s.strip() for s in pieces if s.strip())
    return found


#: What a command line or a code block's text holds and a sentence of prose does not: a
#: path into the checkout, a URL, a shell prompt, a comment mark, braces, an assignment.
_CODE = re.compile(r"(^|\s)(\.venv/|\$ |# )|://|[{}=]|^#")


def looks_like_code(sentence: str) -> bool:
    """Whether a passage's sentence is a command or code (a Markdown code block becomes the
    passage's plain text): it may match the question's words, but it does not read as an
    answer, so the quote takes prose when the passage has any."""
    return _CODE.search(sentence) is not None


def readable(sentence: str) -> str:
    """A sentence as the quote shows it: prose as it is, a code block's comment as the text
    it is ("# put it into a MongoDB" -> "Put it into a MongoDB:"), a command in backticks."""
    if not looks_like_code(sentence):
        return sentence
    if sentence.startswith("# "):
        comment = sentence[2:].strip().rstrip(":")
        return f"{comment[:1].upper()}{comment[1:]}:"
    return f"`{sentence}`"


#: Quotes kept by question and passage: embedding a passage's sentences is the costly part
#: of an answer (milliseconds), and the same questions come back ("what is chorus?"); a
#: call that long also sends the skill's calls off the event loop for a while
#: (agent/connectors/quick_calls.py), where every later call waits on a thread.
QUOTES_KEPT = 512


@lru_cache(maxsize=QUOTES_KEPT)
def best_sentences(question: str, passage: str) -> str:
    """The :data:`MAX_SENTENCES` sentences of ``passage`` closest to ``question``, in order:
    sentences of prose when there are any."""
    candidates = sentences(passage)
    prose = [s for s in candidates if not looks_like_code(s)]
    candidates = prose or candidates
    if not candidates:
        return passage[:MAX_CHARS]
    wanted = set(terms(question))
    cosines = embed_texts(candidates) @ embed_texts([question])[0]
    scores = [
        (len(wanted & set(terms(s))) / len(wanted) if wanted else 0.0) + float(c)
        for s, c in zip(candidates, cosines, strict=True)
    ]
    chosen = sorted(sorted(range(len(candidates)), key=lambda i: -scores[i])[:MAX_SENTENCES])
    quote = " ".join(readable(candidates[i]) for i in chosen)
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
    """Whether the intents annotator is sure of a conversational intent
    (:func:`shared.reading.sure_intent`): "how are you?", "hi" and "thanks" are small
    talk's to answer, however many of their words the docs hold ("How are you?" is in the
    README's examples). An intent read only by likeness is not enough: "hi, is there a
    REST API for the bot?" opens with a greeting and "can a human agent take over a
    conversation?" is near "are you a human", and both ask the docs."""
    return reading.sure_intent(dialog.human_utterance.annotations) is not None


def follows_other_subject(dialog: DialogView, found: Retrieved) -> bool:
    """Whether the retrieval annotator read the utterance as a follow-up (it searched it
    with the question before) and that question had no passage the skill would answer: "are they
    noisy?" after a question on heat pumps is about heat pumps, whatever the docs say about
    noise. A question about the docs whose passage fell short (:data:`FOLLOWED_FROM`) still
    leads a follow-up whose own words are near its passage (:data:`FOLLOW_UP_COSINE`) to
    the docs. Needs the previous human utterance in the window (``context_window`` 3);
    without it nothing is known and the follow-up is answered on its own merits. After a
    question the turn's reading took for the docs' (:func:`about_the_docs`), the
    follow-up is the docs' too."""
    if found.context is None:
        return False
    humans = [u for u in dialog.utterances if u.speaker == "human"]
    if len(humans) < 2:
        return False
    previous = humans[-2].annotations.get("retrieval")
    if not isinstance(previous, dict):
        return False
    try:
        before = Retrieved.model_validate(previous)
    except ValidationError:
        return False
    if about_the_docs(humans[-2].annotations):
        return False
    if not before.passages:
        return True
    first = before.passages[0].confidence
    if answerable(first):
        return False
    own = found.passages[0].cosine if found.passages else None
    near = own is not None and own >= FOLLOW_UP_COSINE
    return not (first >= FOLLOWED_FROM and near)


def about_the_docs(annotations: dict[str, Any]) -> bool:
    """Whether the turn's reading gives the skill :data:`FOLLOWS_DOCS_FROM` or more: a
    question about Chorus whose passage fell short ("Does it work with Telegram out of
    the box?"), whose follow-up ("and slack?", "which ones matter for alerting") is about
    Chorus too."""
    read = reading.of(annotations)
    p = read.get("knowledge") if read is not None else None
    return isinstance(p, int | float) and p >= FOLLOWS_DOCS_FROM


def off_subject(found: Retrieved) -> bool:
    """Whether the best passage's meaning is too far from a question that is not a
    follow-up (:data:`MIN_COSINE`): the words matched, the subject did not."""
    cosine = found.passages[0].cosine if found.passages else None
    return found.context is None and cosine is not None and cosine < MIN_COSINE


def answerable(raw: float) -> bool:
    """Whether a passage this sure would be answered: over the retrieval's threshold, and
    its calibrated chance of fitting at least an even one."""
    return raw >= THRESHOLD and chance("knowledge", ANSWER_TYPE, raw) >= SILENT_BELOW


def answer(dialog: DialogView) -> SkillHypothesis | None:
    """The extractive answer, or None when retrieval is not confident enough, the
    utterance asks nothing (:func:`shared.asking.asks`: "Marek", "add a docstring"), bids
    for work (:func:`shared.asking.bids_for_work`: "can you write me a skill that tells the
    weather?", "show me the last error in the logs") or is small talk, its meaning is far
    from the passage's (:func:`off_subject`) or it follows a question the docs did not
    answer, or the turn's reading is sure it is the LLM's and not the docs'
    (:func:`shared.reading.rules_out`), or the calibrated chance that it fits is under an
    even one; where only the
    passage's confidence or meaning falls short, the turn's reading may still answer it
    (:func:`by_reading`)."""
    said = read_as_asked(dialog.human_utterance.text)
    if small_talk(dialog) or not asks(said) or bids_for_work(said):
        return None
    found = retrieved(dialog)
    if found is None or not found.passages:
        return None
    best = found.passages[0]
    if follows_other_subject(dialog, found):
        return None
    annotations = dialog.human_utterance.annotations
    if best.confidence < THRESHOLD or off_subject(found):
        return by_reading(said, best, annotations)
    if reading.rules_out("knowledge", reading.of(annotations)):
        return None  # the reading is sure the turn is the LLM's, and not the docs'
    hypothesis = calibrated(
        quoted(said, best, best.confidence), "knowledge", ANSWER_TYPE, annotations
    )
    if hypothesis is not None:
        hypothesis.confidence = min(hypothesis.confidence, MAX_CONFIDENCE)
    return hypothesis


def quoted(said: str, best: RetrievedPassage, confidence: float) -> SkillHypothesis:
    """The answer from ``best``: its sentences closest to ``said``, and where they come from."""
    where = f"{best.source}, {best.section}" if best.section else best.source
    return SkillHypothesis(
        text=f"From {where}: {best_sentences(said, best.text)}",
        confidence=confidence,
        citations=[citation(1, best)],
    )


def by_reading(
    said: str, best: RetrievedPassage, annotations: dict[str, Any]
) -> SkillHypothesis | None:
    """Where the skill's own gates are silent (the passage under :data:`THRESHOLD`, or far
    in meaning from the question), the passage when it is :data:`READ_PASSAGE_FROM` sure
    and the turn's reading is sure the turn is the skill's
    (:func:`shared.reading.passage_by_reading`): a question about Chorus asked loosely
    ("how do I connect it to OpenAI?", "whos behind this bot?"). As sure as the reading,
    capped at :data:`MAX_CONFIDENCE`; ``routing`` says so (``kind`` ``by_reading``).

    Recording a run for the calibration (:func:`shared.calibration.recording`, no reading
    there), the answer is kept with no confidence (it never wins the run) and the
    passage's as its raw score, for the replay to weigh with each fold's reading."""
    if best.confidence < READ_PASSAGE_FROM:
        return None
    if recording():
        hypothesis = quoted(said, best, 0.0)
        routing = {"skill": "knowledge", "kind": reading.BY_READING, "raw": best.confidence}
    else:
        chance = reading.passage_by_reading("knowledge", reading.of(annotations), reading.shipped())
        if chance is None:
            return None
        hypothesis = quoted(said, best, round(min(chance, MAX_CONFIDENCE), 4))
        routing = {"skill": "knowledge", "kind": reading.BY_READING, "raw": chance, "read": chance}
    setattr(hypothesis, "routing", routing)  # noqa: B010
    return hypothesis


# Its handler reads only memory (the turn's passages, the embedding table): in the agent's
# process its quick calls may run on the event loop.
service = Service(
    "knowledge",
    description="Answers from the knowledge base, citing it.",
    never_blocks=True,
    never_changes_view=True,
)


@service.skill
def knowledge(dialog: DialogView) -> list[SkillHypothesis]:
    # Synchronous: embedding the passage's sentences is CPU work (the SDK's worker thread).
    hypothesis = answer(dialog)
    return [hypothesis] if hypothesis else []


app = service.app
# the spelling dictionary loaded at start-up, not on the first turn (shared/spelling.py)
spelling.warm()
