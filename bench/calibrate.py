"""Fits the skills' confidence curves (``shared/calibration.json``) and the turn's reading
(``shared/reading.json``) on the training sets, dev, train, train2, train3, train4, train5,
train6, train7, train8, train9, train10, train11, train12, train13, train14, train15,
train16 and train17.

Runs the sets' conversations through the shipped pipeline without the LLM and without any
calibration (``SKILL_CALIBRATION=off``: every skill's raw score, and the answers a curve
would have silenced), and keeps every hypothesis that says how it was made (``routing:
{"skill", "kind", "raw"}``, ``kind`` being its answer type, :mod:`shared.calibration`) with
whether its skill fits the turn's label. Per skill and answer type, an isotonic regression
(scikit-learn) of "fitted" on the raw score gives a monotone curve: the share of such
answers that fitted, at each score. Each point is drawn towards an even chance
(:data:`PRIOR`) by :data:`PRIOR_ANSWERS` pseudo-answers, so an answer type seen on a
handful of turns claims little either way: eight answers that all fitted read as 0.83, not
1, and keep the LLM out only when they were many (a set of a few hundred turns holds many
answer types seen a few times, whose share there is a poor guess of their share elsewhere).
Every conversation of the sets is used: what the curves are worth on conversations they
never saw is estimated by ``--folds`` and ``--across`` (below), and measured on the
held-out sets.

    .venv/bin/python -m bench.calibrate                # the eighteen training sets -> shared/*.json
    .venv/bin/python -m bench.calibrate --set my.jsonl --out /tmp/mine.json
    .venv/bin/python -m bench.calibrate --folds 5      # the out-of-sample estimate, no file
    .venv/bin/python -m bench.calibrate --folds 5 --noise 0.5   # the same, typed carelessly
    .venv/bin/python -m bench.calibrate --set dev train --across   # fit on dev, measure train
    .venv/bin/python -m bench.calibrate --set dev+train+train2 train3 --across  # a stranger's voice
    .venv/bin/python -m bench.calibrate --set dev+train+train2+train3 train4 --across
    .venv/bin/python -m bench.calibrate --set dev+train+train2+train3+train4 train5 --across
    .venv/bin/python -m bench.calibrate --set dev+train+train2+train3+train4+train5 train6 \
        --across                                       # ordinary voices, written blind
    .venv/bin/python -m bench.calibrate \
        --set dev+train+train2+train3+train4+train5+train6 train7 --across  # another writer
    .venv/bin/python -m bench.calibrate \
        --set dev+train+train2+train3+train4+train5+train6+train7 train8 --across  # a third
    .venv/bin/python -m bench.calibrate \
        --set dev+train+train2+train3+train4+train5+train6+train7+train8 train9 --across
    .venv/bin/python -m bench.calibrate \
        --set dev+train+train2+train3+train4+train5+train6+train7+train8+train9 train10 \
        --across                                       # the eleventh, written blind beside train9
    .venv/bin/python -m bench.calibrate --set \
        dev+train+train2+train3+train4+train5+train6+train7+train8+train9+train10+train11+train12 \
        train13 --across                               # the fourteenth, written blind beside 11, 12
    .venv/bin/python -m bench.calibrate --set dev+train+...+train13 train14 --across
                                                       # the fifteenth, blind after them
                                                       # ("..." being train2 to train12)
    .venv/bin/python -m bench.calibrate --set dev+train+...+train14 train15 --across
                                                       # the sixteenth, unusual voices, blind
    .venv/bin/python -m bench.calibrate --folds 5 --misses  # ... and list what went wrong
    .venv/bin/python -m bench.calibrate --turns bench/results/calibrate-dev.json \
        bench/results/calibrate-train.json           # replay saved runs: no new run
    .venv/bin/python -m bench.calibrate --own-sets     # + the knowledge question set (below)

``--across`` fits the curves and the reading on the first set alone and decides each of
the other sets' turns with them: a stranger's set, as issue #46's hidden set is. Fitted on
dev's one voice, train's turns read much as the held-out sets' do, which ``--folds`` over
dev alone did not show; fitted on train, dev's read better.

``--folds K`` estimates what the curves are worth on conversations they were not fitted
on, from the dev set alone: the conversations are dealt into K folds, and for each fold the
curves are fitted on the other K-1 and the fold's turns decided with them
(:func:`decide`, the response selector's and the LLM tier's rule replayed on the run's
raw hypotheses), so every turn is scored by curves that never saw its conversation. A
set's own figures read better than its fresh conversations will (the curves fitted its
phrasing): the holdout set, and issue #46's hidden set, look like the folds, not like the
in-sample figure printed beside them. Only the figures are printed; the shipped file is
left alone.

A skill whose own labelled set is richer than the conversations' names it in
:data:`LABELLED_SOURCES`, and ``--own-sets`` fits its curve on both: the conversations'
hypotheses plus that set's (raw score, fitted) samples. The knowledge skill is the first:
the dev set holds some forty of its answers, too few to place the curve (two fits of the
same code put its lowest band at 0.45 or at 0.5, silent or not on a passage at a raw 0.6),
while bench/knowledge.py's question set labels hundreds, each with its raw score and
whether its passage cites a right source (:func:`bench.knowledge.labelled_answers`: the
set's two fitting thirds only, so its held-out third and its fresh sets stay out of
sample; an unanswerable question the skill would answer is a sample that did not fit).
``--folds`` adds those samples to every fold's fit (they are no conversation's turns). It
is not the default: fitted that way (182 answers, 140 of the question set), the curve put
raw 0.61-0.65 at exactly an even chance, which answers, and declined fewer unanswerable
questions and cited fewer right files on the held-out third and the fresh sets than the
shipped curve (docs/performance.md, "Knowledge base"), so the shipped curve stays: without
``--own-sets``, a fit takes such a skill's curve from the calibration file it replaces
(:func:`kept_curves`), in its folds too, and fits the others. ``--refit-kept`` fits it on
the set's turns as any other, which a change of the skill's raw score needs (the same
passage scores otherwise, and the kept curve no longer maps it).

Beside the curves, the turn's reading (:mod:`shared.reading`, ``shared/reading.json``)
is fitted on the same turns (:mod:`bench.reading`): a network of one hidden layer over the
turn's features with a logistic output per label, and the combiner that weighs its
probability with each answer's curve. ``--folds`` prints the figures of the curves
alone and of the curves with the reading (``K-fold+read``: the reading fitted on the
other folds too), so the reading is judged out of sample like the curves;
``--strength`` sets its penalty.

A deployment's own skills get curves the same way: they return ``routing`` (with
:func:`shared.calibration.calibrated`), and a labelled set of their turns is run here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression

from bench import reading
from bench.llm_turns import stack
from bench.noise import noisy
from bench.routing import (
    LLM,
    ROOT,
    TRAINING_SETS,
    Conversation,
    Hypothesis,
    Observed,
    converse,
    load_set,
    set_path,
    shipped_run_below,
    with_llm,
    without_llm,
)
from bench.run import RESULTS
from response_selectors.confidence.app import (
    FALLBACK_BELOW,
    FALLBACK_BELOW_VARIABLE,
    WEAK_PENALTY,
)
from shared.calibration import (
    CALIBRATION_FILE,
    CALIBRATION_VARIABLE,
    SILENT_BELOW,
    BadCalibration,
    Curve,
)
from shared.calibration import load as load_calibration
from shared.reading import (
    ANSWERS_BY_READING,
    BY_READING,
    READING_FILE,
    READING_VARIABLE,
    ReadingModel,
    answer_by_reading,
    opens_by_reading,
    passage_by_reading,
    probabilities,
    reply_by_reading,
    rules_out,
    stands_on_thread,
    weigh,
)

#: Answer types no routing set can judge, which keep their raw score (no curve). The
#: greeting's "Hello again, NAME!" greets a user it knows, who comes back in a new dialog;
#: each set's conversation is one dialog, so the few such answers the sets hold are a
#: second "hi" within one conversation (4 of the eighteen sets' 13,242 turns, one fitting),
#: and their curve (0.375) silenced every returning user's greeting.
NOT_CALIBRATED: frozenset[tuple[str, str]] = frozenset({("greeting", "greet_again")})
#: What an answer type is worth before any is seen, and how many answers that counts as.
PRIOR = 0.5
PRIOR_ANSWERS = 4.0
#: Points kept per curve at most (the regression's steps, thinned evenly).
MAX_POINTS = 12


#: One labelled answer: its raw score, and whether it fitted.
Sample = tuple[float, bool]
#: (skill, answer type) -> labelled answers, as a skill names them beside the conversations'.
Extra = Mapping[tuple[str, str], Sequence[Sample]]


def knowledge_questions() -> list[Sample]:
    """The knowledge skill's answers on its question set's fitting thirds."""
    from bench.knowledge import labelled_answers  # builds the docs' index: only when fitting

    return labelled_answers()


#: The skills whose own labelled set is richer than the conversations': (skill, answer
#: type) -> a function giving that set's samples, added to the conversations' for its curve.
LABELLED_SOURCES: dict[tuple[str, str], Callable[[], list[Sample]]] = {
    ("knowledge", "passage"): knowledge_questions,
}


def labelled_samples() -> dict[tuple[str, str], list[Sample]]:
    return {key: source() for key, source in LABELLED_SOURCES.items()}


#: (skill, answer type) -> a curve taken as it is (the calibration file's form), not
#: fitted on the conversations.
Kept = Mapping[tuple[str, str], Mapping[str, Any]]


def kept_curves(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The curves of :data:`LABELLED_SOURCES`'s answer types in the calibration file at
    ``path``, which a refit keeps: each was chosen on its skill's own labelled set, against
    that skill's own targets (the knowledge skill's: declining what the docs do not hold,
    docs/knowledge.md), which no routing set measures. Fitted on the conversations alone,
    the knowledge curve answers every passage from a raw 0.6, and would have replaced it at
    every refit. A type the file lacks is fitted as any other."""
    try:
        shipped = load_calibration(path) if path.exists() else {}
    except BadCalibration as error:
        raise SystemExit(f"{error}; pass --out another") from None
    return {
        (skill, answer_type): shipped[skill][answer_type].model_dump()
        for skill, answer_type in LABELLED_SOURCES
        if answer_type in shipped.get(skill, {})
    }


def samples(
    turns: Sequence[Observed], extra: Extra | None = None
) -> dict[tuple[str, str], list[Sample]]:
    """(skill, answer type) -> (raw score, whether the skill fits the turn) of every hypothesis
    that says how it was made, then ``extra``'s labelled answers; none of
    :data:`NOT_CALIBRATED`."""
    found: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for turn in turns:
        for h in turn.hypotheses:
            # an answer by the reading has no curve: the reading is its chance
            if h.answer_type in (None, BY_READING) or h.raw is None:
                continue
            if (h.skill, h.answer_type) not in NOT_CALIBRATED:
                found[(h.skill, h.answer_type)].append((float(h.raw), h.skill in turn.fits))
    for key, more in (extra or {}).items():
        found[key].extend(more)
    return found


def curve(points: list[tuple[float, bool]], prior: float) -> dict[str, object]:
    raw = np.array([p[0] for p in points])
    fitted = np.array([1.0 if p[1] else 0.0 for p in points])
    regression = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    regression.fit(raw, fitted)
    xs = np.asarray(regression.X_thresholds_, dtype=float)
    ys = np.asarray(regression.y_thresholds_, dtype=float)
    # each step's weight: the answers of its block (those the regression gives its value)
    predicted = regression.predict(raw)
    weight = np.array([np.sum(np.isclose(predicted, y)) for y in ys], dtype=float)
    shrunk = (ys * weight + prior * PRIOR_ANSWERS) / (weight + PRIOR_ANSWERS)
    keep = np.unique(np.linspace(0, len(xs) - 1, min(len(xs), MAX_POINTS)).round().astype(int))
    return {
        "raw": [round(float(x), 4) for x in xs[keep]],
        "fit": [round(float(y), 4) for y in np.maximum.accumulate(shrunk[keep])],
        "answers": len(points),
    }


def fit(
    turns: Sequence[Observed], extra: Extra | None = None, kept: Kept | None = None
) -> dict[str, dict[str, dict[str, object]]]:
    """Each answer type's curve fitted on ``turns`` (and ``extra``), but ``kept``'s, taken
    as they are."""
    kept = kept or {}
    found = {
        key: curve(points, PRIOR)
        for key, points in samples(turns, extra).items()
        if key not in kept
    }
    found.update({key: dict(c) for key, c in kept.items()})
    curves: dict[str, dict[str, dict[str, object]]] = defaultdict(dict)
    for (skill, answer_type), c in sorted(found.items()):
        curves[skill][answer_type] = c
    return dict(curves)


@dataclass(frozen=True)
class Decided:
    """What answered one turn, replayed: the winner without the LLM, and whether the LLM
    would have been asked (and so answered) with it."""

    skill: str
    llm_asked: bool


@dataclass(frozen=True)
class Read:
    """A turn's reading (label -> probability) and the model whose combiners weigh it."""

    probabilities: Mapping[str, float]
    model: ReadingModel
    #: the intents annotator's reading of the turn, which chooses a skill's answer by the
    #: reading (:func:`shared.reading.answer_by_reading`)
    intent: Mapping[str, Any] = field(default_factory=dict)
    #: the turn is a statement right after small talk's own question, as the run had it
    replying: bool = False
    #: the turn is a few words of a statement late in the conversation, not right after
    #: the greeting's name question, as the run had it
    #: (:func:`skills.smalltalk.matchers.nods_by_reading`)
    nodding: bool = False
    #: the turn is a statement late in the conversation, not right after the greeting's
    #: name question, as the run had it (:func:`skills.smalltalk.matchers.states_by_reading`)
    stating: bool = False
    #: the turn replies to the greeting's name question, as the run had it
    #: (:func:`skills.greeting.app.replies_to_name_question`)
    naming: bool = False
    #: the turn asks for what no small-talk line holds (a question of fact, a task,
    #: memory: :func:`skills.smalltalk.asks.beyond_small_talk`), where small talk does not
    #: answer by the reading either
    beyond: bool = False
    #: the turn opens its conversation (no bot line before it) asking nothing of its own,
    #: so that the greeting may open the script by the reading
    #: (:func:`skills.greeting.app.may_open_by_reading`)
    opening: bool = False
    #: the turn carries on the LLM's thread: the bot's line before it was the LLM's kind
    #: (the fallback's in a run), or only small talk's guesses from the mood stand between
    #: them (:func:`threads`)
    after_llm: bool = False
    #: the turn asks something, with its mark or without, as small talk reads it before
    #: answering by the reading (:func:`shared.asking.asks_something`)
    asking: bool = False
    #: the turn asks something of the bot (:func:`shared.asking.on_its_own_life`), which small
    #: talk answers by the reading with its line on its own life
    asking_bot: bool = False
    #: the turn is a statement right after the greeting's name question, as the run had it
    #: (:func:`skills.smalltalk.matchers.states_after_name_question`)
    greeted: bool = False


def confidence_of(
    h: Hypothesis, curves: Mapping[str, Mapping[str, Curve]], read: Read | None = None
) -> float | None:
    """``h``'s confidence under ``curves`` and the turn's reading, as
    :func:`shared.calibration.calibrated` gives it; None when the skill would have stayed
    silent."""
    if h.answer_type is None or h.raw is None:
        return h.confidence
    if h.answer_type == BY_READING:
        return by_reading(h, read)
    if read is not None and rules_out(h.skill, read.probabilities):
        return None  # the skill leaves a turn the reading is sure is the LLM's alone
    known = curves.get(h.skill, {}).get(h.answer_type)
    if known is None:
        return float(h.raw)
    value = min(1.0, max(0.0, known(float(h.raw))))
    combiner = None if read is None else read.model.combiner_for(h.skill)
    if read is not None and combiner is not None and h.skill in read.probabilities:
        value = weigh(combiner, value, read.probabilities[h.skill])
    return None if value < SILENT_BELOW else value


def threads(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn carries on the LLM's thread, as the run answered the turns before
    (:func:`skills.smalltalk.thread.on_llm_thread`, with the shipped persona's lines)."""
    from skills.smalltalk.persona import FILE_PERSONA
    from skills.smalltalk.thread import THREAD_LINES, on_llm_thread

    answered = {(t.conversation, t.place): t for t in turns}
    found = []
    for t in turns:
        lines: list[tuple[str | None, str]] = []
        for back in range(1, THREAD_LINES + 1):
            before = answered.get((t.conversation, t.place - back))
            if before is None:
                break
            lines.append((before.skill, before.answer))
        found.append(on_llm_thread(lines, FILE_PERSONA))
    return found


def replies(turns: Sequence[Observed], thread: Sequence[bool]) -> list[bool]:
    """Whether each turn is a statement right after small talk's own question, as the run
    answered the turn before (:func:`skills.smalltalk.matchers.replies_to_own_question`), not
    on the LLM's thread (``thread``: :func:`threads` of ``turns``)."""
    from skills.smalltalk.matchers import replies_to_own_question

    answered = {(t.conversation, t.place): t for t in turns}
    found = []
    for t, line, on_thread in zip(turns, reading.previous_lines(turns), thread, strict=True):
        before = answered.get((t.conversation, t.place - 1))
        skill = before.skill if before is not None else None
        found.append(
            line is not None and not on_thread and replies_to_own_question(t.text, line, skill)
        )
    return found


def nods(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn is one small talk nods to when the reading is sure, as the run
    answered the turn before (:func:`skills.smalltalk.matchers.nods_by_reading`)."""
    from skills.smalltalk.matchers import nods_by_reading

    return [
        skill is not None and nods_by_reading(t.text, skill, line)
        for t, skill, line in zip(
            turns, reading.previous_skills(turns), reading.previous_lines(turns), strict=True
        )
    ]


def states(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn is a statement small talk answers by its mood when the reading is
    sure, as the run answered the turn before
    (:func:`skills.smalltalk.matchers.states_by_reading`)."""
    from skills.smalltalk.matchers import states_by_reading

    return [
        skill is not None and states_by_reading(t.text, skill, line)
        for t, skill, line in zip(
            turns, reading.previous_skills(turns), reading.previous_lines(turns), strict=True
        )
    ]


def greeted_states(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn is a statement right after the greeting's name question, which
    small talk answers by its mood when the reading is surer still, as the run answered
    the turn before (:func:`skills.smalltalk.matchers.states_after_name_question`)."""
    from skills.smalltalk.matchers import states_after_name_question

    return [
        skill is not None and states_after_name_question(t.text, skill, line)
        for t, skill, line in zip(
            turns, reading.previous_skills(turns), reading.previous_lines(turns), strict=True
        )
    ]


def name_replies(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn replies to the greeting's name question, as the run answered the
    turn before (:func:`skills.greeting.app.replies_to_name_question`: its stage is
    taken to wait for the name whenever its last line asked it)."""
    from shared.asking import asked_name

    return [
        skill == "greeting" and line is not None and asked_name(line)
        for skill, line in zip(
            reading.previous_skills(turns), reading.previous_lines(turns), strict=True
        )
    ]


def beyond(turns: Sequence[Observed], thread: Sequence[bool]) -> list[bool]:
    """Whether each turn asks for what no small-talk line holds, as small talk reads it
    before answering by the reading (:func:`skills.smalltalk.asks.beyond_small_talk`; on
    the LLM's thread, ``thread``: :func:`threads` of ``turns``)."""
    from shared import spelling
    from skills.smalltalk.asks import beyond_small_talk

    return [
        beyond_small_talk(spelling.normalise(t.text), after_llm=on_thread) is not None
        for t, on_thread in zip(turns, thread, strict=True)
    ]


def ran(skill: str, intent: Mapping[str, Any]) -> bool:
    """Whether the shipped skill selector's rules run ``skill`` on a turn the intents
    annotator reads as ``intent`` (no toxic turn, no greeting waiting: the few turns where
    those differ keep the answers their run recorded)."""
    from skill_selectors.rules.app import RULES, select

    chosen = select(RULES, {"intents": dict(intent)}, {})
    return not chosen.skills or skill in chosen.skills or skill not in (chosen.decides or [])


def may_answer_by_reading(text: str, annotations: Mapping[str, Any]) -> bool:
    """Whether the greeting may answer a reply to its name question by the reading
    (:func:`skills.greeting.app.may_answer_by_reading`)."""
    from skills.greeting.app import may_answer_by_reading as may

    return may(text, annotations)


def by_reading(h: Hypothesis, read: Read | None) -> float | None:
    """The chance of ``h``, an answer the run recorded by the reading (the knowledge
    skill's weaker passage, :func:`skills.knowledge.app.by_reading`), as the skill gives
    it with this turn's reading: the reading's probability from its floor
    (:func:`shared.reading.passage_by_reading`), capped as the skill caps it; None (silent)
    without a reading or under the floor."""
    from skills.knowledge.app import MAX_CONFIDENCE

    if read is None:
        return None
    chance = passage_by_reading(h.skill, read.probabilities, read.model)
    return None if chance is None else min(chance, MAX_CONFIDENCE)


def guesses_off_thread(h: Hypothesis, read: Read | None) -> bool:
    """Whether small talk leaves out ``h``, a guess from the mood on the LLM's thread that
    the reading finds no surer small talk's than the LLM's
    (:func:`shared.reading.stands_on_thread`, as small talk's ``respond`` does)."""
    from skills.smalltalk.thread import AFTER_LLM

    return (
        read is not None
        and read.after_llm
        and h.skill == "smalltalk"
        and (h.answer_type or "").endswith(AFTER_LLM)
        and not stands_on_thread("smalltalk", read.probabilities, read.model)
    )


def decide(
    turn: Observed,
    curves: Mapping[str, Mapping[str, Curve]],
    run_below: float,
    read: Read | None = None,
    fallback_below: float = FALLBACK_BELOW,
) -> Decided:
    """The answer ``turn`` would get with ``curves`` (and its reading): the most confident
    cheap hypothesis (ties to the pipeline's order) without the LLM, where a calibrated
    one under ``fallback_below`` gives way to any other (the fallback's, as the response
    selector's weak penalty does); with it, the LLM when the selectors let it run and no
    cheap hypothesis reached ``run_below``. The repeat penalty and a change of the later
    turns' state (a name taken or not) are not replayed."""
    scored = [
        (value, -i, h.skill, h.answer_type is not None)
        for i, h in enumerate(turn.hypotheses)
        if h.skill != LLM
        and not guesses_off_thread(h, read)
        and (value := confidence_of(h, curves, read)) is not None
    ]
    if read is not None:
        # a skill whose own answers all stayed silent answers by the reading when it is
        # sure (as smalltalk's by_reading does; the skill selector runs such a skill)
        answered = {skill for _, _, skill, _ in scored}
        for place, skill in enumerate(ANSWERS_BY_READING):
            found = answer_by_reading(
                skill,
                read.probabilities,
                read.intent,
                read.model,
                read.asking if skill == "smalltalk" else "?" in turn.text,
                # the replay knows small talk's questions only (the shipped replier)
                read.replying and skill == "smalltalk",
                read.nodding and skill == "smalltalk",
                read.stating and skill == "smalltalk",
                read.after_llm,
                read.asking_bot and skill == "smalltalk",
                read.greeted and skill == "smalltalk",
            )
            # small talk reads first whether the turn asks what its lines cannot give
            if read.beyond and skill == "smalltalk":
                continue
            if skill not in answered and found is not None and ran(skill, read.intent):
                scored.append((found[0], -len(turn.hypotheses) - place, skill, True))
        # the greeting by the reading where no pattern of it read the turn: a reply to its
        # name question (its by_reading) or a conversation's opening turn (its
        # opens_by_reading); a turn is never both (the one follows a line, the other none)
        greeted = None
        if "greeting" not in answered:
            if read.naming and may_answer_by_reading(turn.text, {"intents": dict(read.intent)}):
                greeted = reply_by_reading("greeting", read.probabilities, read.model)
            elif read.opening:
                greeted = opens_by_reading("greeting", read.probabilities, read.intent, read.model)
        if greeted is not None and ran("greeting", read.intent):
            scored.append(
                (greeted, -len(turn.hypotheses) - len(ANSWERS_BY_READING), "greeting", True)
            )
    ranked = [
        (value - (WEAK_PENALTY if calibrated and value < fallback_below else 0.0), order, skill)
        for value, order, skill, calibrated in scored
    ]
    winner = max(ranked)[2] if ranked else "fallback_response"
    asked = turn.llm_selected and not any(value >= run_below for value, *_ in scored)
    return Decided(skill=winner, llm_asked=asked)


def replayed(turns: Sequence[Observed], decided: Sequence[Decided]) -> dict[str, Any]:
    """The routing benchmark's figures (:func:`bench.routing.with_llm`, ``without_llm``)
    for the replayed decisions."""
    off = [replace(t, skill=d.skill, llm_asked=False) for t, d in zip(turns, decided, strict=True)]
    on = [
        replace(t, skill=LLM if d.llm_asked else d.skill, llm_asked=d.llm_asked)
        for t, d in zip(turns, decided, strict=True)
    ]
    return {"llm_on": with_llm(on), "llm_off": without_llm(off)}


def openings(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn opens its conversation asking nothing of its own, where the
    greeting may open the script by the reading
    (:func:`skills.greeting.app.may_open_by_reading`)."""
    from skills.greeting.app import may_open_by_reading

    return [
        line is None and may_open_by_reading(t.text)
        for t, line in zip(turns, reading.previous_lines(turns), strict=True)
    ]


def questions(turns: Sequence[Observed]) -> list[bool]:
    """Whether each turn asks something, with its mark or without, as small talk reads it
    before answering by the reading (:func:`shared.asking.asks_something`)."""
    from shared.asking import asks_something

    return [asks_something(t.text) for t in turns]


def questions_to_the_bot(turns: Sequence[Observed], asking: Sequence[bool]) -> list[bool]:
    """Whether each turn asks the bot about its own life (:func:`shared.asking.on_its_own_life`),
    given whether it asks at all (:func:`questions`), as small talk reads it."""
    from shared.asking import on_its_own_life

    return [asks and on_its_own_life(t.text) for t, asks in zip(turns, asking, strict=True)]


def reader(
    turns: Sequence[Observed],
) -> Callable[[ReadingModel | None, np.ndarray, int], Read | None]:
    """What the reading reads of ``turns``: for a model (None: no reading), a turn's
    feature row and its place in ``turns``, the :class:`Read` that :func:`decide` weighs,
    with what the turn's own text and the bot's line before it say (computed once for all
    the turns, whichever model reads them)."""
    said = reading.turn_intents(turns)
    after_llm = threads(turns)
    replying = replies(turns, after_llm)
    nodding = nods(turns)
    stating = states(turns)
    naming = name_replies(turns)
    asks_beyond = beyond(turns, after_llm)
    opening = openings(turns)
    asking = questions(turns)
    asking_bot = questions_to_the_bot(turns, asking)
    greeted = greeted_states(turns)

    def read(model: ReadingModel | None, row: np.ndarray, i: int) -> Read | None:
        if model is None:
            return None
        return Read(
            probabilities(model, row),
            model,
            said[i],
            replying[i],
            nodding[i],
            stating[i],
            naming[i],
            asks_beyond[i],
            opening[i],
            after_llm[i],
            asking[i],
            asking_bot[i],
            greeted[i],
        )

    return read


def as_curves(fitted: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Curve]]:
    return {
        s: {k: Curve.model_validate(c) for k, c in types.items()} for s, types in fitted.items()
    }


def cross_validate(
    turns: Sequence[Observed],
    folds: int,
    run_below: float,
    extra: Extra | None = None,
    strength: float = reading.STRENGTH,
    decided: list[Decided] | None = None,
    kept: Kept | None = None,
) -> dict[str, dict[str, Any]]:
    """The figures with each conversation's turns decided by curves (and a reading)
    fitted on the other folds' conversations (dealt in the set's order) and ``extra``
    (every fold's), with ``kept``'s curves as they are in every fold, beside the in-sample
    figures (fitted on every conversation, the set scored on itself) for comparison: the
    curves alone, then with the reading. ``decided``, when given, is filled with each
    turn's out-of-fold decision with the reading."""
    grams = reading.choose_grams(turns)
    rows, intents = reading.turn_rows(turns, progress, grams)

    def fit_curves(some: Sequence[Observed]) -> dict[str, dict[str, Curve]]:
        return as_curves(fit(some, extra, kept))

    read_of = reader(turns)

    def with_reading(model: ReadingModel | None, i: int) -> Read | None:
        return read_of(model, rows[i], i)

    order = list(dict.fromkeys(t.conversation for t in turns))
    fold_of = {c: i % folds for i, c in enumerate(order)}
    alone: list[Decided | None] = [None] * len(turns)
    read: list[Decided | None] = [None] * len(turns)
    for k in range(folds):
        progress(f"fold {k + 1} of {folds}")
        inside = [i for i, t in enumerate(turns) if fold_of[t.conversation] != k]
        others = [turns[i] for i in inside]
        curves = fit_curves(others)
        model = reading.fit(rows[inside], others, intents, fit_curves, strength, progress, grams)
        for i, t in enumerate(turns):
            if fold_of[t.conversation] == k:
                alone[i] = decide(t, curves, run_below)
                read[i] = decide(t, curves, run_below, with_reading(model, i))
    if decided is not None:  # the out-of-fold decisions with the reading, for --misses
        decided[:] = [d for d in read if d is not None]
    everywhere = fit_curves(turns)
    progress("every turn, in sample")
    model = reading.fit(rows, turns, intents, fit_curves, strength, progress, grams)
    if model is not None:
        print(f"reading fitted on every turn: {model.labels}, combiners {model.combiners}")
    return {
        f"{folds}-fold": replayed(turns, [d for d in alone if d is not None]),
        f"{folds}-fold+read": replayed(turns, [d for d in read if d is not None]),
        "in-sample": replayed(turns, [decide(t, everywhere, run_below) for t in turns]),
        "in-sample+read": replayed(
            turns,
            [decide(t, everywhere, run_below, with_reading(model, i)) for i, t in enumerate(turns)],
        ),
    }


def across(
    fitted_on: Sequence[Observed],
    measured: Sequence[Observed],
    run_below: float,
    extra: Extra | None = None,
    strength: float = reading.STRENGTH,
    kept: Kept | None = None,
) -> tuple[dict[str, dict[str, Any]], list[Decided]]:
    """The figures of ``measured``'s turns decided by curves and a reading fitted on
    ``fitted_on`` alone (another set: a stranger's turns, as the hidden set's will be),
    the curves alone and with the reading; and the decisions with the reading."""
    grams = reading.choose_grams(fitted_on)
    rows, intents = reading.turn_rows([*fitted_on, *measured], progress, grams)
    read_of = reader(measured)
    curves = as_curves(fit(fitted_on, extra, kept))
    model = reading.fit(
        rows[: len(fitted_on)],
        fitted_on,
        intents,
        lambda some: as_curves(fit(some, extra, kept)),
        strength,
        progress,
        grams,
    )
    alone = [decide(t, curves, run_below) for t in measured]
    read = [
        decide(t, curves, run_below, read_of(model, rows[len(fitted_on) + i], i))
        for i, t in enumerate(measured)
    ]
    figures = {"curves": replayed(measured, alone), "curves+read": replayed(measured, read)}
    return figures, read


def misses(turns: Sequence[Observed], decided: Sequence[Decided]) -> list[str]:
    """The replayed turns that went wrong, one line each, for reading what a mechanism
    misses: a wrong cheap answer (LLM on or off), a cheap-labelled turn left to the
    fallback without the LLM, and a cheap-labelled turn sent to the LLM."""
    lines = []
    for t, d in zip(turns, decided, strict=True):
        cheap = d.skill != LLM and d.skill not in {"fallback", "fallback_response"}
        if cheap and d.skill not in t.fits:
            kind = "WRONG" if not d.llm_asked else "wrong-off"
        elif not t.llm_only and not cheap:
            kind = "fallback-off" + (" +llm" if d.llm_asked else "")
        elif not t.llm_only and d.llm_asked:
            kind = "llm"
        else:
            continue
        heard = ", ".join(
            f"{h.skill}:{h.answer_type}={h.raw}" for h in t.hypotheses if h.answer_type
        )
        lines.append(
            f"{kind:16} {t.conversation}#{t.place} fits={'+'.join(t.fits)} got={d.skill} "
            f"| {t.text!r} | after {(t.previous or '')[:50]!r} | {heard}"
        )
    return lines


def print_estimate(figures: dict[str, dict[str, Any]]) -> None:
    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.2f} %"

    rows = [
        ("LLM on: wrong cheap answers", "llm_on", "wrong_cheap"),
        ("LLM on: LLM asked", "llm_on", "llm_asked"),
        ("LLM on: fitting cheap answers", "llm_on", "fitting_cheap"),
        ("LLM off: fallbacks on cheap-labelled", "llm_off", "fallback_on_cheap_labelled"),
        ("LLM off: cheap pretended, LLM-only", "llm_off", "cheap_pretended_on_llm_only"),
        ("LLM off: wrong answers", "llm_off", "wrong"),
    ]
    names = list(figures)
    print(f"{'':38}" + "".join(f"{n:>12}" for n in names))
    for label, side, key in rows:
        values = [figures[n][side][key] for n in names]
        shown = [str(v) if isinstance(v, int) else pct(v) for v in values]
        print(f"{label:38}" + "".join(f"{v:>12}" for v in shown))


def progress(line: str) -> None:
    """How far a long run or fit is, on stderr: the figures stay alone on stdout."""
    print(f"bench.calibrate: {line}", file=sys.stderr, flush=True)


def run(conversations: Sequence[Conversation], name: str) -> list[Observed]:
    """The conversations through the shipped pipeline, LLM off, every skill's raw score
    (the response selector's weak penalty off: a raw score is no chance); the turns are
    kept in ``bench/results/calibrate-NAME.json`` for ``--turns``."""
    os.environ[CALIBRATION_VARIABLE] = "off"
    os.environ[READING_VARIABLE] = "off"
    # raw scores are no chances: the response selector's weak penalty stays off, and each
    # turn is answered by its most confident raw hypothesis, as the curves were first fitted
    os.environ[FALLBACK_BELOW_VARIABLE] = "0"
    turns_in = sum(len(c.turns) for c in conversations)
    progress(f"running {name}: {len(conversations)} conversations, {turns_in} turns, LLM off")
    with stack(ROOT, None, False) as off:
        turns = [t for c in conversations for t in converse(off, c, "calibrate")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved = RESULTS / f"calibrate-{name}.json"
    saved.write_text(json.dumps([asdict(t) for t in turns], indent=1) + "\n")
    return turns


def load_turns(path: Path) -> list[Observed]:
    turns = []
    for t in json.loads(path.read_text()):
        hypotheses = [Hypothesis(**h) for h in t.pop("hypotheses")]
        turns.append(Observed(**t, hypotheses=hypotheses))
    return turns


def set_turns(name: str, noise: float, saved: Sequence[Path]) -> list[Observed]:
    """One set's turns: from ``saved`` runs when they hold its conversations, else run.
    Names joined by ``+`` ("dev+train") are those sets together, as one (``--across``
    fits on it)."""
    if "+" in name and not Path(name).exists():
        return [t for part in name.split("+") for t in set_turns(part, noise, saved)]
    conversations = load_set(set_path(name))
    if noise:
        conversations = noisy(conversations, noise)
    ids = {c.id for c in conversations}
    if saved:
        found = [t for path in saved for t in load_turns(path) if t.conversation in ids]
        if found:
            return found
    return run(conversations, Path(name).stem + (f"-noise{noise:g}" if noise else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set",
        nargs="+",
        default=list(TRAINING_SETS),
        help=f"the sets fitted on together: {', '.join(TRAINING_SETS)} or set files' paths (one "
        "or more; 'dev+train' is two sets as one, for --across)",
    )
    parser.add_argument("--out", type=Path, default=CALIBRATION_FILE)
    parser.add_argument(
        "--folds", type=int, help="print the K-fold estimate by conversation; write no file"
    )
    parser.add_argument(
        "--across",
        action="store_true",
        help="fit on the first set alone and measure on each of the others; write no file",
    )
    parser.add_argument(
        "--misses",
        action="store_true",
        help="with --folds or --across: list the replayed turns that went wrong",
    )
    parser.add_argument(
        "--turns",
        type=Path,
        nargs="+",
        default=[],
        help="the raw turns of earlier runs (their saved files): no run for the sets they hold",
    )
    parser.add_argument(
        "--noise",
        type=float,
        default=0.0,
        help="type the set's turns carelessly with this chance (bench.noise): with --folds",
    )
    parser.add_argument(
        "--own-sets",
        action="store_true",
        help="add the skills' own labelled sets (LABELLED_SOURCES) to the set's turns",
    )
    parser.add_argument(
        "--refit-kept",
        action="store_true",
        help="fit the curves a refit keeps (LABELLED_SOURCES') on the set's turns too, as "
        "after a change of what such a skill scores",
    )
    parser.add_argument(
        "--strength",
        type=float,
        default=reading.STRENGTH,
        help="the strength of the reading's L2 penalty, scikit-learn's alpha (bench/reading.py)",
    )
    parser.add_argument(
        "--reading-out",
        type=Path,
        default=READING_FILE,
        help="where the turn's reading goes (shared/reading.py)",
    )
    args = parser.parse_args(argv)
    if args.folds is not None and args.folds < 2:
        parser.error("--folds needs 2 or more")
    if args.noise and not (args.folds or args.across):
        parser.error("--noise measures; it fits no curves for shipping: use it with --folds")
    if args.across and len(args.set) < 2:
        parser.error("--across needs two sets or more: the first fitted on, the others measured")
    if args.misses and not (args.folds or args.across):
        parser.error("--misses lists a measurement's misses: use it with --folds or --across")
    by_set = [set_turns(name, args.noise, args.turns) for name in args.set]
    turns = [t for some in by_set for t in some]
    conversations = len({t.conversation for t in turns})
    extra = labelled_samples() if args.own_sets else {}
    # what the refit replaces keeps the curves chosen on their skills' own sets
    kept_from = args.out if args.out.exists() else CALIBRATION_FILE
    kept = {} if args.own_sets or args.refit_kept else kept_curves(kept_from)
    run_below = shipped_run_below(ROOT)
    if args.across:
        for name, measured in zip(args.set[1:], by_set[1:], strict=True):
            figures, crossed = across(by_set[0], measured, run_below, extra, args.strength, kept)
            print(
                f"fitted on {args.set[0]} ({len(by_set[0])} turns), measured on {name} "
                f"({len(measured)} turns)"
            )
            print_estimate(figures)
            if args.misses:
                print("\n".join(misses(measured, crossed)))
        return 0
    if args.folds:
        decided: list[Decided] = []
        figures = cross_validate(turns, args.folds, run_below, extra, args.strength, decided, kept)
        print(
            f"{' + '.join(args.set)}: {conversations} conversations, {len(turns)} turns, "
            f"{args.folds} folds by conversation"
        )
        print_estimate(figures)
        if args.misses:
            print("\n".join(misses(turns, decided)))
        return 0
    curves = fit(turns, extra, kept)
    args.out.write_text(json.dumps(curves, indent=1) + "\n")
    for skill, answer_types in curves.items():
        for answer_type, c in answer_types.items():
            own = len(extra.get((skill, answer_type), ()))
            count = f"{c['answers']:4} answers" + (f" ({own} of its own set)" if own else "")
            if (skill, answer_type) in kept:
                count += f" (kept from {kept_from})"
            print(f"{skill:10} {answer_type:18} {count}  {c['raw']} -> {c['fit']}")
    grams = reading.choose_grams(turns)
    rows, intents = reading.turn_rows(turns, progress, grams)
    model = reading.fit(
        rows,
        turns,
        intents,
        lambda some: as_curves(fit(some, extra, kept)),
        args.strength,
        progress,
        grams,
    )
    if model is None:
        print(f"no label has {reading.MIN_TURNS} turns: no reading written")
    else:
        args.reading_out.write_text(model.model_dump_json() + "\n")
        print(f"reading: labels {model.labels}, {model.combiners}: {args.reading_out}")
    print(f"{' + '.join(args.set)}: {conversations} conversations, {len(turns)} turns: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
