"""How well the shipped bot answers from its own docs, and how fast it searches.

On the labelled question set (``bench/data/knowledge/questions.jsonl``: questions docs/ and
README.md answer, each with its source and section, and questions they do not):

- **recall@3**: the share of answerable questions with a right passage (the labelled
  source and section, or one of ``also``) among the three best the retrieval annotator
  returns, and **file recall@3**, a passage of a right *file* among them;
- **the LLM's passages**: the share of answerable questions with a passage of a right file
  among those the LLM skill is given (all the annotator returns, :data:`TOP_K`, when the
  best is at or over its floor, ``LLM_KNOWLEDGE_MIN_CONFIDENCE``), which its answer cites:
  the issue's "right source cited" with an LLM, as the share of the skill's answers citing
  a right source is without one; recall@k, a right section among them; and the prompt's
  size, the passages and characters given a turn on average;
- **cited right source**: the share of answerable questions the knowledge skill answers
  (its best passage's confidence at least the skill's threshold, and no small-talk intent
  from the intents annotator) citing a right source;
- **declined**: the share of unanswerable questions it leaves to other skills;
- with ``--served``, the same four as **the shipped bot** gives them: the questions asked
  of ``chorus run`` (no LLM), each a new user's, a follow-up after its question, and the
  knowledge skill's answer and its cited source read off the reply. Every gate of the
  skill counts there (the turn's reading, which lifts or demotes a passage, its answers
  by the reading, the other skills), where the figures above weigh the search and the
  skill's own threshold alone;
- **p50 of a retrieval** at 1,000 and 100,000 passages, one question at a time.

Each question is asked after the one before it in the file, as in a conversation: a
follow-up must be recognised as one, and a fresh question must not be read as one.

The index is built from docs/ and README.md as ``chorus run`` builds it. The large corpora
are synthesised from it: passages made of the docs' sentences shuffled among pages, so
BM25 sees a real vocabulary, with the docs' embeddings jittered and normalised again
(embedding 100,000 passages would take this machine minutes and change nothing of a
search's cost, a product with a 100,000 x 256 matrix).

``--fit`` fits the confidence's logistic weights (:data:`shared.knowledge.retrieval.WEIGHTS`)
on two thirds of the set (the label of a question's best passage is whether its source is
right) and prints the figures they give on the other third. The shipped weights were
fitted that way, so the ``held_out`` figures the benchmark writes (every third question)
are out of sample; the figures over the whole set are partly in sample. The search's own
constants are chosen on the same two thirds (a change is kept only when the held-out third
does not lose), and ``--questions bench/data/knowledge/fresh.jsonl`` measures a second set
written after the tuning, out of sample for everything (``fresh2.jsonl``, a third, was
written after the confidence's signs of the answer's file were first chosen, and
``fresh3.jsonl``, a fourth, before they were chosen again and kept).
``--fit --features a,b,c`` fits other signs of :data:`shared.knowledge.retrieval.SIGNS`;
``--conversations dev train ...`` counts the routing training sets' turns the knowledge
skill would consider (:func:`reach`: about Chorus, and not, over its threshold and where its
curve answers), and with ``--fit`` fits on those turns too
(:func:`conversation_rows`: a question about Chorus is 1, any other turn 0); weights so
fitted were measured and not shipped (bench/journal/knowledge.md, "The probability fitted
on conversations too").
``--top-k N`` measures another ``KNOWLEDGE_TOP_K`` (the LLM's passages; the three best and
the knowledge skill's answers do not depend on it), ``--llm-floor F`` another
``LLM_KNOWLEDGE_MIN_CONFIDENCE`` (the LLM skill's least confidence of a passage it is
given). ``--docs DIR`` builds the index from
``DIR`` in place of docs/ (its files named "docs/..." as the labels name them, README.md as
shipped): the same questions over another version of the corpus, such as docs/ with a
page trimmed, to measure what the corpus itself does to the search.

    .venv/bin/python -m bench.knowledge            # writes bench/results/knowledge.json
    .venv/bin/python -m bench.knowledge --fit
    .venv/bin/python -m bench.knowledge --served   # ... and as the shipped bot answers
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.cli.knowledge import DOCS, build  # noqa: E402
from annotators.intents.app import CATCHER  # noqa: E402
from bench.routing import TRAINING_SETS  # noqa: E402
from shared import spelling  # noqa: E402
from shared.asking import asks  # noqa: E402
from shared.calibration import SILENT_BELOW, chance  # noqa: E402
from shared.knowledge.index import Hit, KnowledgeIndex  # noqa: E402
from shared.knowledge.passages import Passage  # noqa: E402
from shared.knowledge.retrieval import (  # noqa: E402
    FEATURES,
    SIGNS,
    TOP_K,
    WEIGHTS,
    confidence,
    follow_up_context,
    probability,
    quotes,
    signs,
)
from shared.reading import SURE  # noqa: E402
from skills.knowledge.app import (  # noqa: E402
    ANSWER_TYPE,
    MIN_COSINE,
    THRESHOLD,
)
from skills.llm.app import LLMSettings, given  # noqa: E402

QUESTIONS = ROOT / "bench" / "data" / "knowledge" / "questions.jsonl"
RESULTS = ROOT / "bench" / "results" / "knowledge.json"
#: The questions timed per corpus size.
TIMED = 200
#: The least confidence of a passage the LLM skill is given, as it ships.
LLM_FLOOR: float = LLMSettings.model_fields["knowledge_min_confidence"].default


class Place(BaseModel):
    source: str
    section: str


class Question(BaseModel):
    id: str
    question: str
    answerable: bool
    source: str | None = None
    section: str | None = None
    follows: str | None = None
    also: list[Place] = Field(default_factory=list)

    def places(self) -> set[tuple[str, str]]:
        if self.source is None or self.section is None:
            return set()
        found = {(self.source, self.section), *((p.source, p.section) for p in self.also)}
        return {(source, plain(section)) for source, section in found}

    def sources(self) -> set[str]:
        return {source for source, _ in self.places()}


def plain(heading: str) -> str:
    """A heading as the passages keep it (rendered text: no backticks), spaces squeezed."""
    return " ".join(heading.replace("`", "").split())


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    return [Question.model_validate_json(line) for line in path.read_text().splitlines() if line]


def held_out(position: int) -> bool:
    """Whether the question at ``position`` (0-based, in the file) is in the held-out third:
    every third one. ``--fit`` fits the weights on the other two thirds, so the figures on
    this third are out of sample for weights fitted that way."""
    return position % 3 == 2


@dataclass
class Asked:
    """One question as the bot met it: what the search found and what the skill would do."""

    question: Question
    position: int
    hits: list[Hit]
    chat: bool  # the intents annotator read it as small talk: the skill leaves it
    read_as_follow_up: bool
    llm_floor: float = LLM_FLOOR  # the LLM skill's LLM_KNOWLEDGE_MIN_CONFIDENCE

    def found_in_3(self) -> bool:
        places = self.question.places()
        return any((h.passage.source, plain(h.passage.section)) in places for h in self.hits[:3])

    def file_in_3(self) -> bool:
        """Whether a passage of a right file is among the three best."""
        return any(h.passage.source in self.question.sources() for h in self.hits[:3])

    def given_to_llm(self) -> list[Hit]:
        """The passages the LLM skill is given, as it chooses them (:func:`given`): every
        one the annotator returns when the best is at or over its floor (:data:`LLM_FLOOR`
        as shipped), a passage quoting the question (:func:`quotes`) left out."""
        sure = [
            0.0 if quotes(h.passage.text, self.question.question) else round(confidence(h), 4)
            for h in self.hits
        ]
        return [self.hits[at] for at in given(sure, self.llm_floor)]

    def found_by_llm(self) -> bool:
        """Whether a right section is among the LLM's passages."""
        places = self.question.places()
        return any(
            (h.passage.source, plain(h.passage.section)) in places for h in self.given_to_llm()
        )

    def llm_right_file(self) -> bool:
        """Whether a passage of a right file is among the LLM's passages, which it cites."""
        return any(h.passage.source in self.question.sources() for h in self.given_to_llm())

    def right_source(self) -> bool:
        return bool(self.hits) and self.hits[0].passage.source in self.question.sources()

    def raw(self, weights: tuple[float, ...] = WEIGHTS, names: tuple[str, ...] = FEATURES) -> float:
        """The knowledge skill's raw score: its best passage's confidence (0 with none)."""
        return confidence(self.hits[0], weights, names) if self.hits else 0.0

    def considered(
        self, weights: tuple[float, ...] = WEIGHTS, names: tuple[str, ...] = FEATURES
    ) -> bool:
        """Whether the knowledge skill answers before its calibration has its say: a turn
        that asks something (:func:`shared.asking.asks`), over the retrieval's threshold,
        not small talk, not a quote, and its meaning close enough to the passage's unless
        it is a follow-up."""
        return (
            bool(self.hits)
            and asks(spelling.normalise(self.question.question))
            and self.raw(weights, names) >= THRESHOLD
            and not self.chat
            and (self.read_as_follow_up or self.hits[0].cosine >= MIN_COSINE)
            and not quotes(self.hits[0].passage.text, self.question.question)
        )

    def sure(self, weights: tuple[float, ...], names: tuple[str, ...] = FEATURES) -> bool:
        """Whether the knowledge skill answers: considered, and its calibrated chance of
        fitting a conversation's turn at least an even one."""
        return (
            self.considered(weights, names)
            and chance("knowledge", ANSWER_TYPE, self.raw(weights, names)) >= SILENT_BELOW
        )

    def fitted(self) -> bool:
        """Whether an answer to it fits: it cites a right source (never, unanswerable)."""
        return self.question.answerable and self.right_source()


def ask(
    index: KnowledgeIndex,
    questions: list[Question],
    top_k: int = TOP_K,
    llm_floor: float = LLM_FLOOR,
) -> list[Asked]:
    """Each question searched after the one before it, as in a conversation, for ``top_k``
    passages (``KNOWLEDGE_TOP_K``), the LLM given those at or over ``llm_floor``
    (``LLM_KNOWLEDGE_MIN_CONFIDENCE``)."""
    asked = []
    previous: str | None = None
    for position, question in enumerate(questions):
        text = spelling.normalise(question.question, index.knows)  # as the annotator reads it
        context = follow_up_context(text, previous)
        previous = text
        intent = CATCHER.classify(question.question)
        asked.append(
            Asked(
                question=question,
                position=position,
                hits=index.search(text, k=top_k, context=context),
                chat=intent.intent is not None and intent.confidence >= SURE,
                read_as_follow_up=context is not None,
                llm_floor=llm_floor,
            )
        )
    return asked


def figures(
    asked: list[Asked],
    weights: tuple[float, ...] = WEIGHTS,
    names: tuple[str, ...] = FEATURES,
    top_k: int = TOP_K,
) -> dict[str, Any]:
    """The quality figures over ``asked``, with the confidence's ``weights`` over ``names``."""
    answerable = [a for a in asked if a.question.answerable]
    unanswerable = [a for a in asked if not a.question.answerable]
    answered = [a for a in answerable if a.sure(weights, names)]
    cited_right = [a for a in answered if a.right_source()]
    follow_ups = [a for a in answerable if a.question.follows]

    def share(part: list[Asked], whole: list[Asked]) -> float | None:
        return round(len(part) / len(whole), 3) if whole else None

    def mean(values: list[int]) -> float | None:
        return round(statistics.fmean(values), 1) if values else None

    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "recall_at_3": share([a for a in answerable if a.found_in_3()], answerable),
        "file_recall_at_3": share([a for a in answerable if a.file_in_3()], answerable),
        f"recall_at_{top_k}_given_to_llm": share(
            [a for a in answerable if a.found_by_llm()], answerable
        ),
        "llm_given_a_right_file": share([a for a in answerable if a.llm_right_file()], answerable),
        "unanswerable_given_passages": share(
            [a for a in unanswerable if a.given_to_llm()], unanswerable
        ),
        # the prompt's size: the passages, and their characters, the LLM is given a turn
        "llm_passages_a_turn": mean([len(a.given_to_llm()) for a in asked]),
        "llm_characters_a_turn": mean(
            [sum(len(h.passage.text) for h in a.given_to_llm()) for a in asked]
        ),
        "answered": share(answered, answerable),
        "cited_right_source": share(cited_right, answerable),
        "right_source_of_answers": share(cited_right, answered),
        "declined": share([a for a in unanswerable if not a.sure(weights, names)], unanswerable),
        "follow_ups_read_as_such": (
            f"{sum(a.read_as_follow_up for a in follow_ups)}/{len(follow_ups)}"
        ),
        "fresh_questions_read_as_follow_ups": sum(
            a.read_as_follow_up and not a.question.follows for a in asked
        ),
        "missed_at_3": [a.question.id for a in answerable if not a.found_in_3()],
    }


class Served(BaseModel):
    """One question as the shipped bot answered it: whether the knowledge skill did, and
    the source its answer cites."""

    question: Question
    position: int
    source: str | None

    @property
    def answered(self) -> bool:
        return self.source is not None

    def right_source(self) -> bool:
        return self.source in self.question.sources()


def serve(questions: list[Question], repo: Path = ROOT) -> list[Served]:
    """The questions through the shipped pipeline (``chorus run`` of ``repo``, no LLM), each
    a new user's first turn, a follow-up after its question: what a user of the bot sees,
    every gate of the skill included (the turn's reading, its answers by the reading, the
    other skills), where :func:`figures` weighs the search and the skill's own threshold
    alone."""
    from bench.llm_turns import stack  # the served stack only for --served

    served: list[Served] = []
    user = ""
    with stack(repo, None, False) as client:
        for position, question in enumerate(questions):
            if question.follows is None:
                user = f"knowledge-{question.id}"
            response = client.post("/", json={"user_id": user, "payload": question.question})
            response.raise_for_status()
            answer = response.json()
            cited = (answer.get("attributes") or {}).get("citations") or [{}]
            knows = answer.get("active_skill") == "knowledge"
            source = cited[0].get("source") if knows else None
            served.append(Served(question=question, position=position, source=source))
    return served


def served_figures(served: list[Served]) -> dict[str, Any]:
    """What the shipped bot's knowledge skill did with ``served``: the share of answerable
    questions it answered, and answered citing a right source, the right share of its
    answers, and the share of unanswerable questions it left to other skills."""
    answerable = [s for s in served if s.question.answerable]
    unanswerable = [s for s in served if not s.question.answerable]
    answered = [s for s in answerable if s.answered]
    right = [s for s in answered if s.right_source()]

    def share(part: list[Served], whole: list[Served]) -> float | None:
        return round(len(part) / len(whole), 3) if whole else None

    return {
        "answered": share(answered, answerable),
        "cited_right_source": share(right, answerable),
        "right_source_of_answers": share(right, answered),
        "declined": share([s for s in unanswerable if not s.answered], unanswerable),
    }


def calibration_samples(asked: list[Asked]) -> list[tuple[float, bool]]:
    """The knowledge skill's labelled answers for its calibration curve
    (:mod:`bench.calibrate`): of the two fitting thirds only (never :func:`held_out`, so
    the held-out third stays out of sample for the curve as for the weights), one (raw
    score, fitted) per question the skill would answer before calibrating."""
    return [(a.raw(), a.fitted()) for a in asked if not held_out(a.position) and a.considered()]


def docs_index(docs: Path | None = None) -> tuple[KnowledgeIndex, float]:
    """The index of docs/ and README.md as ``chorus run`` builds it, and its build's seconds;
    with ``docs``, of that folder in docs/'s place (copied as ``docs`` beside a copy of
    README.md, so its passages are named "docs/..." as the questions' labels are)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "docs.npz"
        if docs is None:
            built = build([ROOT / p for p in DOCS], out, base=ROOT)
        else:
            base = Path(folder) / "corpus"
            shutil.copytree(docs, base / "docs")
            shutil.copy(ROOT / "README.md", base / "README.md")
            built = build([base / "docs", base / "README.md"], out, base=base)
        return KnowledgeIndex.load(out), built.seconds


def labelled_answers(questions: Path = QUESTIONS) -> list[tuple[float, bool]]:
    """:func:`calibration_samples` of the question set, searched as the benchmark does."""
    index, _ = docs_index()
    return calibration_samples(ask(index, load_questions(questions)))


def training_rows(
    asked: list[Asked], names: tuple[str, ...] = FEATURES
) -> list[tuple[list[float], int]]:
    """Each question's best passage: its features, and 1 when it is from a right source
    of an answerable question (0 for an unanswerable one)."""
    return [
        (signs(a.hits[0], names), int(a.question.answerable and a.right_source()))
        for a in asked
        if a.hits
    ]


#: The conversations' turns, all together, weigh this many times the question set's rows
#: in the fit: 1, of 0.25 to 4 (bench/journal/knowledge.md, "The probability fitted on
#: conversations too").
CONVERSATIONS_WEIGHT = 1.0


def conversation_rows(
    index: KnowledgeIndex, sets: list[str], names: tuple[str, ...] = FEATURES
) -> list[tuple[list[float], int]]:
    """The routing training sets' turns the knowledge skill weighs, each as its best
    passage's features and 1 when the turn is labelled ``knowledge`` (a question about
    Chorus the docs answer), 0 for any other turn. Searched as the annotator does (the
    spelling read with the docs' words, a follow-up with the turn before it); kept when
    the skill would look at its confidence: it asks something, is not small talk to the
    intents annotator, its meaning is near its passage unless it is a follow-up, and the
    passage does not quote it. The question set alone taught the probability what a
    question written to the docs looks like; a conversation's questions about Chorus are
    shorter ("is there a docker setup?") and sit among turns about anything else."""
    from bench.routing import load_set, set_path

    rows: list[tuple[list[float], int]] = []
    for name in sets:
        if name not in TRAINING_SETS:
            raise ValueError(f"{name}: not a training set ({', '.join(TRAINING_SETS)})")
        for conversation in load_set(set_path(name)):
            previous: str | None = None
            for turn in conversation.turns:
                text = spelling.normalise(turn.user, index.knows)
                context = follow_up_context(text, previous)
                previous = text
                if turn.fits is None or not asks(spelling.normalise(turn.user)):
                    continue
                intent = CATCHER.classify(turn.user)
                if intent.intent is not None and intent.confidence >= SURE:
                    continue
                hits = index.search(text, k=TOP_K, context=context)
                if not hits or quotes(hits[0].passage.text, turn.user):
                    continue
                if context is None and hits[0].cosine < MIN_COSINE:
                    continue
                rows.append((signs(hits[0], names), int("knowledge" in turn.fits)))
    return rows


def reach(rows: list[tuple[list[float], int]]) -> dict[str, int]:
    """How many of the conversations' turns (:func:`conversation_rows` of :data:`FEATURES`)
    the shipped probability lets the knowledge skill consider: about Chorus and not, at
    its threshold (:data:`THRESHOLD`) and at its curve's even chance (``SILENT_BELOW``),
    where the served skill answers. A change of the search that finds a spoken question's
    section moves the first count of each pair; the second is what it costs."""
    raws = [(probability(xs), y) for xs, y in rows]
    answered = [
        (raw, y) for raw, y in raws if chance("knowledge", ANSWER_TYPE, raw) >= SILENT_BELOW
    ]
    return {
        "about_chorus_over_threshold": sum(y for raw, y in raws if raw >= THRESHOLD),
        "others_over_threshold": sum(1 - y for raw, y in raws if raw >= THRESHOLD),
        "about_chorus_answered": sum(y for _, y in answered),
        "others_answered": sum(1 - y for _, y in answered),
    }


def synthetic(index: KnowledgeIndex, size: int, seed: int = 7) -> KnowledgeIndex:
    """``size`` passages of the docs' sentences shuffled, with jittered docs embeddings."""
    rng = random.Random(seed)
    sentences = [s for p in index.passages for s in p.text.split(". ") if len(s) > 20]
    passages = []
    for number in range(size):
        text = ". ".join(rng.sample(sentences, 4))
        passages.append(Passage(source=f"synthetic/{number // 50}.md", headings=["S"], text=text))
    noise = np.random.default_rng(seed)
    rows = index.embeddings[noise.integers(0, len(index), size)]
    rows = rows + noise.normal(0, 0.05, rows.shape).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return KnowledgeIndex(passages, rows)


def p50_ms(index: KnowledgeIndex, questions: list[str], top_k: int = TOP_K) -> float:
    index.search(questions[0])  # the first search loads what it needs
    times = []
    for question in questions:
        started = time.perf_counter()
        index.search(question, k=top_k)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def fit(
    rows: list[tuple[list[float], int]],
    turns: list[tuple[list[float], int]] | None = None,
    weight: float = CONVERSATIONS_WEIGHT,
) -> tuple[float, ...]:
    """The logistic weights over ``rows`` (the question set's) and ``turns`` (the
    conversations', :func:`conversation_rows`), those weighing ``weight`` times the
    question set's rows all together: several times as many, they would otherwise decide
    alone what a question written to the docs is worth."""
    from sklearn.linear_model import LogisticRegression

    turns = turns or []
    x = np.array([r[0] for r in rows + turns])
    y = np.array([r[1] for r in rows + turns])
    each = weight * len(rows) / len(turns) if turns else 1.0
    sample = np.array([1.0] * len(rows) + [each] * len(turns))
    # C = 1 (scikit-learn's default regularisation): of C in 0.3, 1, 10, 100, the one whose
    # weights declined at least 0.9 of the unanswerable questions of the fitting two thirds
    # and answered the most of the rest; 10 fitted steeper weights that declined 0.85.
    model = LogisticRegression(C=1.0, max_iter=2000).fit(x, y, sample_weight=sample)
    return (round(float(model.intercept_[0]), 2), *(round(float(w), 2) for w in model.coef_[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 100_000])
    parser.add_argument("--fit", action="store_true", help="fit the confidence's weights")
    parser.add_argument(
        "--features",
        default=",".join(FEATURES),
        help=f"with --fit: the signs to weigh, comma-separated, of {', '.join(SIGNS)}",
    )
    parser.add_argument(
        "--conversations",
        nargs="*",
        default=[],
        metavar="SET",
        help=f"routing training sets whose turns about Chorus and others the skill would "
        f"consider are counted, and with --fit fitted on too (of {', '.join(TRAINING_SETS)})",
    )
    parser.add_argument(
        "--conversations-weight",
        type=float,
        default=CONVERSATIONS_WEIGHT,
        help="with --conversations: their turns' weight against the question set's, all "
        f"together ({CONVERSATIONS_WEIGHT} as shipped)",
    )
    parser.add_argument(
        "--served",
        action="store_true",
        help="also ask the questions of the shipped bot (no LLM), every gate included",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the figures go")
    parser.add_argument(
        "--llm-floor",
        type=float,
        default=LLM_FLOOR,
        help=f"the least confidence of a passage the LLM is given, as "
        f"LLM_KNOWLEDGE_MIN_CONFIDENCE (0-1; {LLM_FLOOR} as shipped)",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        help="a folder searched in docs/'s place (its files named docs/...): another "
        "version of the corpus, the same questions",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=TOP_K,
        help=f"passages a turn, as KNOWLEDGE_TOP_K (1-20; {TOP_K} as shipped): what the LLM "
        "would be given with another setting",
    )
    args = parser.parse_args(argv)
    names = tuple(n.strip() for n in args.features.split(",") if n.strip())
    if unknown := [n for n in names if n not in SIGNS]:
        parser.error(f"--features: {', '.join(unknown)} not of {', '.join(SIGNS)}")
    if not 1 <= args.top_k <= 20:
        parser.error(f"--top-k: {args.top_k} passages; KNOWLEDGE_TOP_K takes 1 to 20")

    if not 0 <= args.llm_floor <= 1:
        parser.error(f"--llm-floor: {args.llm_floor}; LLM_KNOWLEDGE_MIN_CONFIDENCE takes 0 to 1")
    if bad := [s for s in args.conversations if s not in TRAINING_SETS]:
        parser.error(f"--conversations: {', '.join(bad)} not of {', '.join(TRAINING_SETS)}")
    if args.docs is not None and not args.docs.is_dir():
        parser.error(f"--docs: {args.docs} is not a folder")
    if args.served and args.docs is not None:
        parser.error("--served: the shipped bot searches docs/ itself; leave out --docs")

    questions = load_questions(args.questions)
    index, seconds = docs_index(args.docs)
    corpus = f"{args.docs} (as docs/)" if args.docs else "docs/"
    print(f"index of {corpus} and README.md: {len(index)} passages, built in {seconds:.1f}s")
    asked = ask(index, questions, args.top_k, args.llm_floor)
    quality = figures(asked, top_k=args.top_k)
    held = figures([a for a in asked if held_out(a.position)], top_k=args.top_k)
    if args.conversations:
        reached = reach(conversation_rows(index, args.conversations))
        print(
            f"turns of {', '.join(args.conversations)}: "
            + ", ".join(f"{k} {v}" for k, v in reached.items())
        )
    if args.fit:
        turns = conversation_rows(index, args.conversations, names)
        fitted = fit(
            training_rows([a for a in asked if not held_out(a.position)], names),
            turns,
            args.conversations_weight,
        )
        if turns:
            print(
                f"with {len(turns)} turns of {', '.join(args.conversations)} "
                f"({sum(y for _, y in turns)} about Chorus)"
            )
        print(f"FEATURES = {names}")
        print(f"WEIGHTS = {fitted}  # intercept, then one per feature")
        print("  (fitted on two thirds of the questions; on the held-out third with them:")
        refit = figures([a for a in asked if held_out(a.position)], fitted, names, args.top_k)
        print(f"   {', '.join(f'{k} {v}' for k, v in refit.items() if k != 'missed_at_3')})")
    timings = {}
    texts = [q.question for q in questions][:TIMED]
    for size in args.sizes:
        large = synthetic(index, size)
        timings[f"p50_ms_at_{size}"] = p50_ms(large, texts, args.top_k)
    timings["p50_ms_at_docs"] = p50_ms(index, texts, args.top_k)
    held.pop("missed_at_3")
    served: dict[str, Any] = {}
    if args.served:
        answers = serve(questions)
        served["served"] = served_figures(answers)
        served["served_held_out"] = served_figures([s for s in answers if held_out(s.position)])
    result = {
        "docs": str(args.docs) if args.docs else "docs",
        "passages": len(index),
        "threshold": THRESHOLD,
        "top_k": args.top_k,
        "llm_floor": args.llm_floor,
        **quality,
        "held_out": held,
        **timings,
        **served,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for key, value in result.items():
        if key in ("served", "served_held_out"):
            label = "served" if key == "served" else "served, held-out third"
            print(f"{label:>34}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        elif key == "held_out":
            print(f"{'held-out third':>26}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        elif key != "missed_at_3":
            print(f"{key:>34}: {value}")
    print(
        f"{'missed at 3':>34}: {len(quality['missed_at_3'])} ({' '.join(quality['missed_at_3'])})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
