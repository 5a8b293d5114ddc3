"""``bench.calibrate --folds``: each conversation's turns are decided by curves fitted on
the other conversations, as a fresh user's would be, and the decision replays the tiers."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from bench.routing import Hypothesis, Observed
from shared.calibration import Curve

# bench.calibrate is imported by each test that uses it, not here: it loads scikit-learn,
# about 3 s of CPU that every pytest worker paid collecting this module, whether or not it
# ran these tests.


def turn(conversation: str, place: int, fits: list[str], *hypotheses: Hypothesis) -> Observed:
    return Observed(
        conversation=conversation,
        place=place,
        text=f"turn {place}",
        fits=fits,
        skill="",
        answer="",
        llm_asked=False,
        hypotheses=[*hypotheses, Hypothesis(skill="fallback", confidence=0.1, text="Hm.")],
    )


def answer(skill: str, answer_type: str, raw: float, text: str) -> Hypothesis:
    """A calibrated skill's answer: its raw score, and the confidence it was served with."""
    return Hypothesis(skill=skill, confidence=raw, text=text, raw=raw, answer_type=answer_type)


def weather(raw: float) -> Hypothesis:
    return answer("weather", "forecast", raw, "Sunny.")


def test_an_answer_type_that_fits_only_one_users_phrasing_shows_out_of_sample() -> None:
    """The forecast fits every turn of one conversation and none of the other's. Fitted on
    both, it reads as an even chance: never sure enough to keep the LLM out, so no wrong
    cheap answer in-sample. Each conversation judged by curves fitted on the other alone,
    the second gets confident forecasts where only the LLM fits: the estimate says what
    a new user's conversation would see."""
    from bench.calibrate import cross_validate

    turns = [turn("a", i, ["weather"], weather(0.9)) for i in range(10)]
    turns += [turn("b", i, ["llm"], weather(0.9)) for i in range(10)]
    figures = cross_validate(turns, 2, run_below=0.6)
    assert figures["in-sample"]["llm_on"]["wrong_cheap"] == 0.0
    assert figures["in-sample"]["llm_on"]["llm_asked"] == 1.0
    assert figures["2-fold"]["llm_on"]["wrong_cheap"] == 0.5
    # "a", judged by "b"'s curve (it never fitted there), stays silent: the fallback
    # without the LLM, the LLM with it
    assert figures["2-fold"]["llm_off"]["fallback_on_cheap_labelled"] == 1.0
    assert figures["2-fold"]["llm_on"]["llm_asked"] == 0.5


def test_the_replay_decides_as_the_tiers_do() -> None:
    from bench.calibrate import as_curves, decide

    curves = as_curves(
        {"weather": {"forecast": {"raw": [0.2, 0.9], "fit": [0.3, 0.8], "answers": 9}}}
    )
    sure, unsure, silent = (
        turn("c", i, ["weather"], weather(r)) for i, r in enumerate((0.9, 0.6, 0.2))
    )
    # a sure answer keeps the LLM out; one under run_below asks the LLM, and without the
    # LLM gives way to the fallback as the response selector's weak penalty does, unless
    # that floor is off (SELECTOR_FALLBACK_BELOW=0)
    assert (decide(sure, curves, 0.6).skill, decide(sure, curves, 0.6).llm_asked) == (
        "weather",
        False,
    )
    assert (decide(unsure, curves, 0.6).skill, decide(unsure, curves, 0.6).llm_asked) == (
        "fallback",
        True,
    )
    assert decide(unsure, curves, 0.6, fallback_below=0.0).skill == "weather"
    # under an even chance the skill says nothing: the fallback answers
    assert decide(silent, curves, 0.6).skill == "fallback"
    # a skill selector that leaves the LLM out keeps it out
    held = turn("c", 4, ["weather"], weather(0.2))
    held.llm_selected = False
    assert decide(held, curves, 0.6).llm_asked is False


def test_a_noisy_set_is_the_same_turns_typed_carelessly_and_the_same_each_time() -> None:
    """``--noise``: the turns a careless typist would send, labels unchanged, and the same
    noise on every run, so two versions of the code meet the same turns."""
    from bench.noise import noisy
    from bench.routing import Conversation

    said = "Thanks! Could you please tell me what you're doing?"
    conversation = Conversation.model_validate(
        {"id": "n-1", "turns": [{"user": said, "fits": ["smalltalk"]}] * 12}
    )
    (once,) = noisy([conversation], 1.0)
    (again,) = noisy([conversation], 1.0)
    assert [t.user for t in once.turns] == [t.user for t in again.turns]
    careless = once.turns[0].user
    assert careless.startswith("thx! could u pls tell me what") and "'" not in careless
    assert not careless.endswith("?")
    assert all(t.fits == ["smalltalk"] for t in once.turns)
    (tidy,) = noisy([conversation], 0.0)
    assert [t.user for t in tidy.turns] == [said] * 12


def test_a_refit_keeps_greeting_a_returning_user() -> None:
    """The routing sets' conversations are one dialog each, so a "Hello again, NAME!" in
    them answers a second "hi" within the conversation, which seldom fits. A curve fitted
    on those would silence the greeting of a user who comes back in a new dialog, which
    no set holds: a refit leaves that answer its raw score, and fits the others."""
    from bench.calibrate import fit

    again = answer("greeting", "greet_again", 0.9, "Hello again, Ann!")
    turns = [turn("c", i, ["smalltalk"], again, weather(0.9)) for i in range(12)]
    curves = fit(turns)
    assert "greet_again" not in curves.get("greeting", {})
    assert curves["weather"]["forecast"]["answers"] == 12


def test_a_refit_keeps_the_knowledge_curve_chosen_on_its_question_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The knowledge skill's curve is chosen on its own question set, to decline what the
    docs do not hold, which no routing set measures. An operator's refit into the file
    keeps it as it was, where fitted on their conversations it would answer every passage
    they saw fit (here at a raw 0.65, which the shipped curve leaves silent), and fits
    their own skill's curve as before."""
    from bench.calibrate import main
    from shared.calibration import CALIBRATION_FILE

    shipped = json.loads(CALIBRATION_FILE.read_text())
    out = tmp_path / "calibration.json"
    out.write_text(CALIBRATION_FILE.read_text())
    passage = answer("knowledge", "passage", 0.65, "From docs/backup.md: ...")
    conversations, saved = [], []
    for c in range(10):
        said = [("how do I back up the store?", "knowledge"), ("will it rain?", "weather")]
        conversations.append(
            {"id": f"op-{c}", "turns": [{"user": text, "fits": [label]} for text, label in said]}
        )
        for place, (text, label) in enumerate(said, start=1):
            t = turn(f"op-{c}", place, [label], passage, weather(0.8))
            saved.append(asdict(replace(t, text=text)))
    (tmp_path / "mine.jsonl").write_text("\n".join(json.dumps(c) for c in conversations) + "\n")
    (tmp_path / "runs.json").write_text(json.dumps(saved))
    main(
        [
            "--set",
            str(tmp_path / "mine.jsonl"),
            "--turns",
            str(tmp_path / "runs.json"),
            "--out",
            str(out),
            "--reading-out",
            str(tmp_path / "reading.json"),
        ]
    )
    refit = json.loads(out.read_text())
    assert refit["knowledge"]["passage"] == shipped["knowledge"]["passage"]
    assert Curve.model_validate(refit["knowledge"]["passage"])(0.65) < 0.5
    assert refit["weather"]["forecast"]["answers"] == 20
    assert f"kept from {out}" in capsys.readouterr().out
