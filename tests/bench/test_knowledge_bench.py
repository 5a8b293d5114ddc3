"""bench/knowledge.py as its user runs it, on a few questions of the labelled set's format:
it scores each kind of question and writes its figures.

One run is the command as its user starts it, in a process of its own that coverage does not
measure (as the quick benchmark's, tests/bench/test_bench.py: its code is not in coverage's
source). The other options are run through its ``main`` in the test's process, which has
imported the benchmark already: one process start fewer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import knowledge
from bench.knowledge import Asked, Question
from shared.knowledge.index import Hit
from shared.knowledge.passages import Passage
from shared.knowledge.retrieval import TOP_K
from skills.knowledge.app import MIN_COSINE
from tests.support.processes import run_module, unmeasured_environment

QUESTIONS = [
    {
        "id": "k-1",
        "question": "How do I back up every dialog to a file?",
        "answerable": True,
        "source": "docs/backup.md",
        "section": "What to export",
        "follows": None,
    },
    {
        "id": "k-2",
        "question": "Which variable names the MongoDB the agent uses?",
        "answerable": True,
        "source": "docs/deployment.md",
        "section": "Using an existing MongoDB",
        "follows": None,
        "also": [{"source": "docs/configuration.md", "section": "Settings"}],
    },
    {"id": "u-1", "question": "What's a good recipe for pancakes?", "answerable": False},
]


def test_the_benchmark_scores_the_questions_and_writes_its_figures(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "knowledge.json"
    result = run_module(
        "bench.knowledge",
        *("--questions", str(questions), "--sizes", "1000", "--out", str(out)),
        env=unmeasured_environment(),  # as a user runs it, not slowed by tracing
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    assert (figures["answerable"], figures["unanswerable"]) == (2, 1)
    assert figures["declined"] == 1.0  # pancakes are not in the docs
    assert figures["recall_at_3"] == 1.0
    # with an LLM: a passage of a right file among those it is given, and so cites
    assert figures["file_recall_at_3"] == figures["llm_given_a_right_file"] == 1.0
    # Every third question is held out and scored on its own: here the third, pancakes.
    assert (figures["held_out"]["answerable"], figures["held_out"]["unanswerable"]) == (0, 1)
    assert figures["held_out"]["declined"] == 1.0
    assert figures["p50_ms_at_1000"] > 0
    assert "recall_at_3: 1.0" in result.stdout


def test_the_passages_a_turn_are_chosen_as_knowledge_top_k_would_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--top-k`` measures what the LLM would be given with another ``KNOWLEDGE_TOP_K``: the
    figures name it, and the LLM's passages are at most that many. Through ``main`` (the
    command as its user starts it is the test above)."""
    figures = measure(tmp_path, QUESTIONS, "--top-k", "1")
    assert "top_k: 1" in capsys.readouterr().out
    assert figures["top_k"] == 1
    # the LLM's passages are scored as one a turn, not the shipped six
    assert "recall_at_1_given_to_llm" in figures
    assert f"recall_at_{TOP_K}_given_to_llm" not in figures


def one_page_docs(folder: Path) -> Path:
    """A docs folder of one page, backup.md, whose section answers ``QUESTIONS[0]``."""
    folder.mkdir()
    (folder / "backup.md").write_text(
        "# Backup and restore\n\n## What to export\n\n"
        "`chorus export` writes every dialog to a file; back up the conversations with it.\n"
    )
    return folder


def measure(tmp_path: Path, questions: list[dict[str, Any]], *options: str) -> dict[str, Any]:
    """The figures the benchmark writes for ``questions`` with ``options``, run through its
    ``main`` in the test's process (the command as its user starts it is the first test)."""
    asked = tmp_path / "questions.jsonl"
    asked.write_text("".join(json.dumps(q) + "\n" for q in questions))
    out = tmp_path / "knowledge.json"
    assert knowledge.main(["--questions", str(asked), "--sizes", *options, "--out", str(out)]) == 0
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures


def test_another_version_of_the_docs_is_searched_in_their_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--docs DIR`` measures the same questions over another corpus (docs/ with a page
    trimmed): DIR's files are named docs/... as the labels name them, so a question whose
    page is there is found, and the index holds DIR's passages, not the shipped docs'."""
    trimmed = one_page_docs(tmp_path / "trimmed")
    figures = measure(tmp_path, [QUESTIONS[0], QUESTIONS[2]], "--docs", str(trimmed))
    assert figures["docs"] == str(trimmed)
    # the folder's one page and README.md, not the shipped docs' thousand passages and more
    assert figures["passages"] < 200
    assert figures["recall_at_3"] == 1.0  # found as docs/backup.md, the label's name
    assert f"index of {trimmed} (as docs/) and README.md" in capsys.readouterr().out


def test_the_llm_is_given_the_passages_its_floor_lets_through(tmp_path: Path) -> None:
    """``--llm-floor`` measures another ``LLM_KNOWLEDGE_MIN_CONFIDENCE``: at 1 no passage is
    sure enough, so the LLM is given none, though a right file is among the three best."""
    folder = one_page_docs(tmp_path / "docs")
    figures = measure(tmp_path, [QUESTIONS[0]], "--docs", str(folder), "--llm-floor", "1")
    assert figures["llm_floor"] == 1.0
    assert (figures["file_recall_at_3"], figures["llm_given_a_right_file"]) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--llm-floor", "1.5"], "--llm-floor: 1.5; LLM_KNOWLEDGE_MIN_CONFIDENCE takes 0 to 1"),
        (["--docs", "{tmp}/nowhere"], "--docs: {tmp}/nowhere is not a folder"),
        (["--top-k", "0"], "--top-k: 0 passages; KNOWLEDGE_TOP_K takes 1 to 20"),
        (["--fit", "--features", "overlap,lead"], "--features: lead not of overlap, cosine"),
        # a held-out routing set is never searched, let alone fitted on
        (["--fit", "--conversations", "dev", "holdout"], "--conversations: holdout not of dev"),
        # the shipped bot's own index is of docs/: another corpus would not be the one asked
        (["--served", "--docs", "{tmp}"], "--served: the shipped bot searches docs/ itself"),
    ],
    ids=["llm-floor", "docs", "top-k", "features", "held-out-set", "served-docs"],
)
def test_a_setting_the_benchmark_cannot_use_is_refused_before_anything_runs(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its ``main`` in the test's process: the refusal is argparse's exit 2, naming what to
    fix, before any index is built (a run as its user starts it is above)."""
    with pytest.raises(SystemExit) as refused:
        knowledge.main([argument.format(tmp=tmp_path) for argument in arguments])

    assert refused.value.code == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err


def test_the_benchmark_counts_an_answer_as_the_skill_gives_it() -> None:
    # a passage sure of the question's words whose meaning is far from it: the skill is
    # silent (skills/knowledge, MIN_COSINE) unless the question follows another
    question = Question.model_validate(QUESTIONS[0])
    backup = Passage(source="docs/backup.md", headings=["What to export"], text="chorus export")

    def asked(cosine: float, follow_up: bool) -> Asked:
        hit = Hit(
            passage=backup,
            score=2.0,
            cosine=cosine,
            overlap=1.0,
            known=1.0,
            lexical_rank=0,
            dense_rank=0,
            margin=1.0,
            text_overlap=1.0,
        )
        return Asked(question, 0, [hit], chat=False, read_as_follow_up=follow_up)

    assert asked(MIN_COSINE + 0.3, follow_up=False).considered()
    assert not asked(MIN_COSINE - 0.1, follow_up=False).considered()
    assert asked(MIN_COSINE - 0.1, follow_up=True).considered()


def test_the_llm_is_given_the_turns_passages_when_the_best_clears_its_floor() -> None:
    """The LLM skill's floor (``LLM_KNOWLEDGE_MIN_CONFIDENCE``) judges the turn by its best
    passage: over it, a right file is given however unsure its own passage is; under it,
    the LLM is given nothing, though a right file is among the three best."""
    question = Question.model_validate(QUESTIONS[0])
    other = Passage(source="docs/api.md", headings=["Routes"], text="GET /api/dialogs")
    backup = Passage(source="docs/backup.md", headings=["What to export"], text="chorus export")

    def hit(passage: Passage, sure: bool, rank: int) -> Hit:
        level = 1.0 if sure else 0.0
        return Hit(
            passage=passage,
            score=2.0 - rank,
            cosine=0.9 * level,
            overlap=level,
            known=level,
            lexical_rank=rank,
            dense_rank=rank,
            file_voted=sure,
            margin=1.0 if sure else -1.0,
            text_overlap=level,
        )

    def asked(first_sure: bool) -> Asked:
        hits = [hit(other, first_sure, 0), hit(backup, False, 1)]
        return Asked(question, 0, hits, chat=False, read_as_follow_up=False)

    trusted, doubted = asked(first_sure=True), asked(first_sure=False)
    assert trusted.file_in_3() and doubted.file_in_3()
    assert not trusted.right_source()  # the skill would quote the other page
    assert [h.passage.source for h in trusted.given_to_llm()] == ["docs/api.md", "docs/backup.md"]
    assert trusted.llm_right_file() and trusted.found_by_llm()
    assert doubted.given_to_llm() == []
    assert not doubted.llm_right_file()


def test_a_conversations_turns_teach_the_probability_what_is_about_chorus() -> None:
    """``--fit --conversations``: the dev set's turns the skill weighs join the fit, a
    question about Chorus as 1 and any other turn as 0, and weighed against the question
    set's rows, the fitted probability is higher for the turns about Chorus than for the
    rest; a held-out set is refused before anything is searched."""
    import math

    from bench.knowledge import conversation_rows, docs_index, fit

    index, _ = docs_index()
    with pytest.raises(ValueError, match="holdout: not a training set"):
        conversation_rows(index, ["holdout"])
    rows = conversation_rows(index, ["dev"])
    assert 0 < sum(label for _, label in rows) < len(rows)
    # the question set's rows here say nothing either way: what is learnt is the turns'
    neutral = [([0.5] * len(rows[0][0]), 1), ([0.5] * len(rows[0][0]), 0)] * 5
    weights = fit(neutral, rows, 10.0)

    def probability(x: list[float]) -> float:
        z = weights[0] + sum(w * v for w, v in zip(weights[1:], x, strict=True))
        return 1 / (1 + math.exp(-z))

    about = [probability(x) for x, label in rows if label]
    other = [probability(x) for x, label in rows if not label]
    assert sum(about) / len(about) > sum(other) / len(other) + 0.1


def test_the_conversations_turns_the_skill_would_consider_are_counted() -> None:
    """``--conversations`` without ``--fit``: a turn whose best passage is sure counts for
    its label, about Chorus or not, at the threshold and where the served curve answers;
    one whose passage is unsure counts for neither."""
    from bench.knowledge import reach
    from shared.knowledge.retrieval import FEATURES

    sure, unsure = [1.0] * len(FEATURES), [0.0] * len(FEATURES)

    counted = reach([(sure, 1), (sure, 0), (sure, 1), (unsure, 1), (unsure, 0)])

    assert counted == {
        "about_chorus_over_threshold": 2,
        "others_over_threshold": 1,
        "about_chorus_answered": 2,
        "others_answered": 1,
    }


def test_served_the_questions_are_asked_of_the_shipped_bot(tmp_path: Path) -> None:
    """``--served`` asks the shipped bot itself (``chorus run``, no LLM), every gate of
    the skill included: which questions its knowledge skill answered, citing what."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "knowledge.json"
    argv = ["--questions", str(questions), "--sizes", "--served", "--out", str(out)]
    assert knowledge.main(argv) == 0
    served = json.loads(out.read_text())["served"]
    assert served["declined"] == 1.0  # pancakes are the LLM's or the fallback's
    assert served["answered"] == 1.0  # both questions about the docs
    assert served["cited_right_source"] == served["right_source_of_answers"] == 1.0


def test_a_served_answer_counts_only_the_knowledge_skills_cited_source() -> None:
    asked, other = (Question.model_validate(q) for q in QUESTIONS[:2])
    pancakes = Question.model_validate(QUESTIONS[2])
    served = [
        knowledge.Served(question=asked, position=0, source="docs/backup.md"),
        knowledge.Served(question=other, position=1, source="docs/backup.md"),  # wrong file
        knowledge.Served(question=pancakes, position=2, source=None),
    ]
    figures = knowledge.served_figures(served)
    assert figures == {
        "answered": 1.0,
        "cited_right_source": 0.5,
        "right_source_of_answers": 0.5,
        "declined": 1.0,
    }
