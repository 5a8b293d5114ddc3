"""``bench.calibrate`` fits the knowledge skill's curve on its own question set too: the
set's two fitting thirds feed the curve, its held-out third never does, so the knowledge
benchmark's held-out figures stay out of sample for the curve."""

from __future__ import annotations

from bench.knowledge import Question, ask, calibration_samples, docs_index
from bench.routing import LLM, Hypothesis, Observed
from skills.knowledge.app import ANSWER_TYPE

BACKUP = {
    "id": "k-1",
    "question": "How do I back up every dialog to a file?",
    "answerable": True,
    "source": "docs/backup.md",
    "section": "What to export",
}
MONGODB = {
    "id": "k-2",
    "question": "Which variable names the MongoDB the agent uses?",
    "answerable": True,
    "source": "docs/deployment.md",
    "section": "Using an existing MongoDB",
    "also": [{"source": "docs/configuration.md", "section": "Settings"}],
}
PANCAKES = {"id": "u-1", "question": "What's a good recipe for pancakes?", "answerable": False}


def test_the_question_sets_fitting_thirds_feed_the_curve_and_its_held_out_third_does_not() -> None:
    # Imported here: bench.calibrate loads scikit-learn, which every pytest worker paid
    # collecting this module (tests/bench/test_calibrate_folds.py says so too).
    from bench.calibrate import LABELLED_SOURCES, as_curves, fit

    index, _ = docs_index()  # docs/ and README.md, as the benchmark and calibrate build it

    def labelled_answers(*asked: dict[str, object]) -> list[tuple[float, bool]]:
        return calibration_samples(ask(index, [Question.model_validate(q) for q in asked]))

    # positions 0 and 1 fit, position 2 (every third question) is held out
    fitting = labelled_answers(PANCAKES, BACKUP)
    with_held_out = labelled_answers(PANCAKES, BACKUP, MONGODB)
    moved = labelled_answers(PANCAKES, MONGODB, BACKUP)

    # the backup question is answered, citing its right file; pancakes are declined
    assert [fitted for _, fitted in fitting] == [True]
    # the MongoDB question, answered when it fits (below), adds nothing held out
    assert with_held_out == fitting
    assert [fitted for _, fitted in moved] == [True]
    assert moved != fitting  # the MongoDB question's score, the backup one held out

    # the curve is fitted on the conversations' answers and the set's together: a passage
    # answered on a turn only the LLM fits, and the set's two right answers
    passage = Hypothesis(
        skill="knowledge", confidence=0.7, text="From docs/...", raw=0.7, answer_type=ANSWER_TYPE
    )
    turn = Observed(
        conversation="c",
        place=0,
        text="guess",
        fits=[LLM],
        skill="",
        answer="",
        llm_asked=False,
        hypotheses=[passage],
    )
    alone = as_curves(fit([turn]))["knowledge"][ANSWER_TYPE]
    both = as_curves(fit([turn], {("knowledge", ANSWER_TYPE): fitting + moved}))
    assert (alone.answers, both["knowledge"][ANSWER_TYPE].answers) == (1, 3)
    # two of three fitted: the passage's answer reads likelier than on the turn alone
    assert both["knowledge"][ANSWER_TYPE](0.95) > alone(0.95)
    assert ("knowledge", ANSWER_TYPE) in LABELLED_SOURCES
