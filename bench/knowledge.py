"""How well the shipped bot answers from its own docs, and how fast it searches.

On the labelled question set (``bench/data/knowledge/questions.jsonl``: questions docs/ and
README.md answer, each with its source and section, and questions they do not):

- **recall@3**: the share of answerable questions with a right passage (the labelled
  source and section, or one of ``also``) among the three the retrieval annotator returns;
- **cited right source**: the share of answerable questions the knowledge skill answers
  (its best passage's confidence at least the skill's threshold, that confidence's
  calibrated chance of fitting a conversation's turn at least an even one,
  :mod:`shared.calibration`, and no small-talk intent from the intents annotator) citing a
  right source;
- **declined**: the share of unanswerable questions it leaves to other skills;
- **p50 of a retrieval** at 1,000 and 100,000 passages, one question at a time.

Each question is asked after the one before it in the file, as in a conversation: a
follow-up must be recognised as one, and a fresh question must not be read as one.

The index is built from docs/ and README.md as ``chorus run`` builds it. The large corpora
are synthesised from it: passages made of the docs' sentences shuffled among pages, so
BM25 sees a real vocabulary, with the docs' embeddings jittered and normalised again
(embedding 100,000 passages would take this machine minutes and change nothing of a
search's cost, a product with a 100,000 x 256 matrix).

``--fit`` fits the confidence's logistic weights (:data:`shared.knowledge.retrieval.WEIGHTS`)
on the set: the label of a question's best passage is whether its source is right.

    .venv/bin/python -m bench.knowledge            # writes bench/results/knowledge.json
    .venv/bin/python -m bench.knowledge --fit
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.cli.knowledge import DOCS, build  # noqa: E402
from annotators.intents.app import CATCHER  # noqa: E402
from shared.calibration import SILENT_BELOW, chance  # noqa: E402
from shared.knowledge.index import Hit, KnowledgeIndex  # noqa: E402
from shared.knowledge.passages import Passage  # noqa: E402
from shared.knowledge.retrieval import confidence, follow_up_context, quotes  # noqa: E402
from skills.knowledge.app import INTENT_CONFIDENCE, KIND, THRESHOLD  # noqa: E402

QUESTIONS = ROOT / "bench" / "data" / "knowledge" / "questions.jsonl"
RESULTS = ROOT / "bench" / "results" / "knowledge.json"
#: The questions timed per corpus size.
TIMED = 200


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


def features(hit: Hit) -> list[float]:
    both_first = 1.0 if hit.lexical_rank == 0 and hit.dense_rank == 0 else 0.0
    return [hit.overlap, hit.cosine, both_first, hit.known]


def evaluate(index: KnowledgeIndex, questions: list[Question]) -> dict[str, Any]:
    """The quality figures, and per question what the retrieval did (for --fit)."""
    found_in_3 = cited_right = answered = declined = follow_ups_read = 0
    rows: list[tuple[list[float], int]] = []
    misses: list[str] = []
    previous: str | None = None
    for question in questions:
        context = follow_up_context(question.question, previous)
        previous = question.question
        if question.follows and context:
            follow_ups_read += 1
        hits = index.search(question.question, k=3, context=context)
        best = hits[0] if hits else None
        intent = CATCHER.classify(question.question)
        chat = intent.intent is not None and intent.confidence >= INTENT_CONFIDENCE
        sure = (
            best is not None
            and confidence(best) >= THRESHOLD
            # the skill's calibrated chance of fitting a conversation's turn
            and chance("knowledge", KIND, confidence(best)) >= SILENT_BELOW
            and not chat
            and not quotes(best.passage.text, question.question)
        )
        if not question.answerable:
            declined += not sure
            if best is not None:
                rows.append((features(best), 0))
            continue
        places = question.places()
        if any((h.passage.source, plain(h.passage.section)) in places for h in hits):
            found_in_3 += 1
        else:
            misses.append(question.id)
        right_source = best is not None and best.passage.source in question.sources()
        if best is not None:
            rows.append((features(best), int(right_source)))
        answered += sure
        cited_right += sure and right_source
    answerable = sum(q.answerable for q in questions)
    unanswerable = len(questions) - answerable
    follow_ups = sum(bool(q.follows) for q in questions)
    return {
        "answerable": answerable,
        "unanswerable": unanswerable,
        "recall_at_3": round(found_in_3 / answerable, 3),
        "answered": round(answered / answerable, 3),
        "cited_right_source": round(cited_right / answerable, 3),
        "right_source_of_answers": round(cited_right / answered, 3) if answered else None,
        "declined": round(declined / unanswerable, 3),
        "follow_ups_read_as_such": f"{follow_ups_read}/{follow_ups}",
        "missed_at_3": misses,
        "_rows": rows,
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


def p50_ms(index: KnowledgeIndex, questions: list[str]) -> float:
    index.search(questions[0])  # the first search loads what it needs
    times = []
    for question in questions:
        started = time.perf_counter()
        index.search(question, k=3)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def fit(rows: list[tuple[list[float], int]]) -> tuple[float, ...]:
    from sklearn.linear_model import LogisticRegression

    x = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    model = LogisticRegression(C=10.0, max_iter=1000).fit(x, y)
    return (round(float(model.intercept_[0]), 2), *(round(float(w), 2) for w in model.coef_[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 100_000])
    parser.add_argument("--fit", action="store_true", help="fit the confidence's weights")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the figures go")
    args = parser.parse_args(argv)

    questions = load_questions(args.questions)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "docs.npz"
        built = build([ROOT / p for p in DOCS], out, base=ROOT)
        index = KnowledgeIndex.load(out)
    print(f"index of docs/ and README.md: {len(index)} passages, built in {built.seconds:.1f}s")
    quality = evaluate(index, questions)
    rows = quality.pop("_rows")
    if args.fit:
        print(f"WEIGHTS = {fit(rows)}  # intercept, overlap, cosine, both-first")
    timings = {}
    texts = [q.question for q in questions][:TIMED]
    for size in args.sizes:
        large = synthetic(index, size)
        timings[f"p50_ms_at_{size}"] = p50_ms(large, texts)
    timings["p50_ms_at_docs"] = p50_ms(index, texts)
    result = {"passages": len(index), "threshold": THRESHOLD, **quality, **timings}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for key, value in result.items():
        if key != "missed_at_3":
            print(f"{key:>26}: {value}")
    print(
        f"{'missed at 3':>26}: {len(quality['missed_at_3'])} ({' '.join(quality['missed_at_3'])})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
