"""Per-turn scores as ParlAI computes them: exact match, token F1, hits@k and MRR.

ParlAI sends them in an act's ``metrics`` field (that wire name is kept); in Chorus they are
*scores*, so they are never confused with the agent's Prometheus metrics
(:mod:`agent.metrics`).

Answers are compared after ParlAI's ``normalize_answer``: lower case, punctuation and
the articles a/an/the removed, whitespace collapsed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = re.compile(r"[!\"#$%&()*+,./:;<=>?@\[\]\\^`{|}~_']")


def normalize_answer(text: str) -> str:
    text = _PUNCTUATION.sub(" ", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(guess: str, labels: Sequence[str]) -> float:
    answer = normalize_answer(guess)
    return float(any(answer == normalize_answer(label) for label in labels))


def _f1(guess: list[str], label: list[str]) -> float:
    common = Counter(guess) & Counter(label)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(guess), overlap / len(label)
    return 2 * precision * recall / (precision + recall)


def token_f1(guess: str, labels: Sequence[str]) -> float:
    """The best F1 of the guess's tokens against any label's."""
    tokens = normalize_answer(guess).split()
    return max((_f1(tokens, normalize_answer(label).split()) for label in labels), default=0.0)


def reciprocal_rank(ranked: Sequence[str], labels: Sequence[str]) -> float:
    """1/rank of the first candidate that is a label; 0 when none is."""
    wanted = {normalize_answer(label) for label in labels}
    for rank, candidate in enumerate(ranked, start=1):
        if normalize_answer(candidate) in wanted:
            return 1.0 / rank
    return 0.0


def hits_at(k: int, ranked: Sequence[str], labels: Sequence[str]) -> float:
    rr = reciprocal_rank(ranked[:k], labels)
    return float(rr > 0)


class TurnScores(BaseModel):
    """The scores of one answered observation that carried ``eval_labels``."""

    exact_match: float
    f1: float
    hits_at_1: float
    hits_at_5: float
    mrr: float

    @classmethod
    def score(cls, answer: str, ranked: Sequence[str], labels: Sequence[str]) -> TurnScores:
        return cls(
            exact_match=exact_match(answer, labels),
            f1=token_f1(answer, labels),
            hits_at_1=hits_at(1, ranked, labels),
            hits_at_5=hits_at(5, ranked, labels),
            mrr=reciprocal_rank(ranked, labels),
        )


def rank_label_candidates(
    label_candidates: Sequence[str], ranked_answers: Sequence[str]
) -> list[str]:
    """The dataset's candidates in the order of the pipeline's ranking: those a hypothesis
    matches come first, best hypothesis first; the rest keep the dataset's order."""
    position: dict[str, int] = {}
    for rank, answer in enumerate(ranked_answers):
        position.setdefault(normalize_answer(answer), rank)
    order = sorted(
        range(len(label_candidates)),
        key=lambda i: (position.get(normalize_answer(label_candidates[i]), len(ranked_answers)), i),
    )
    return [label_candidates[i] for i in order]
