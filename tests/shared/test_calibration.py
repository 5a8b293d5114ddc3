"""A skill's raw score becomes the chance that its answer fits: the curve of its skill and
answer type, a new answer type kept as it is, an answer under the line silenced, and a bad
file named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.sdk import SkillHypothesis
from shared import calibration

CURVES = {
    "weather": {
        "forecast": {"raw": [0.2, 0.8], "fit": [0.1, 0.9], "answers": 40},
        "guess": {"raw": [0.5], "fit": [0.3], "answers": 12},
    }
}


@pytest.fixture
def curves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(CURVES))
    monkeypatch.setenv(calibration.CALIBRATION_VARIABLE, str(path))
    calibration._shipped.cache_clear()
    yield path
    monkeypatch.undo()
    calibration._shipped.cache_clear()


def answer(confidence: float) -> SkillHypothesis:
    return SkillHypothesis(text="Sunny.", confidence=confidence)


@pytest.mark.usefixtures("curves")
def test_a_raw_score_becomes_the_chance_its_answer_type_fits() -> None:
    sure = calibration.calibrated(answer(0.65), "weather", "forecast")
    assert sure is not None
    assert sure.confidence == 0.7  # halfway along the curve from (0.2, 0.1) to (0.8, 0.9)
    assert sure.model_dump()["routing"] == {"skill": "weather", "kind": "forecast", "raw": 0.65}
    # beyond the ends the curve is flat
    top = calibration.calibrated(answer(0.95), "weather", "forecast")
    assert top is not None and top.confidence == 0.9


@pytest.mark.usefixtures("curves")
def test_an_answer_more_likely_wrong_than_right_is_not_given() -> None:
    assert calibration.calibrated(answer(0.9), "weather", "guess") is None  # fits 30 %
    assert calibration.calibrated(answer(0.35), "weather", "forecast") is None  # 0.3


@pytest.mark.usefixtures("curves")
def test_an_answer_type_without_a_curve_keeps_its_raw_score() -> None:
    new = calibration.calibrated(answer(0.4), "weather", "radar")
    assert new is not None and new.confidence == 0.4


def test_calibration_off_keeps_every_raw_score(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(calibration.CALIBRATION_VARIABLE, "off")
    calibration._shipped.cache_clear()
    try:
        kept = calibration.calibrated(answer(0.2), "smalltalk", "corpus")
        assert kept is not None and kept.confidence == 0.2
    finally:
        monkeypatch.undo()
        calibration._shipped.cache_clear()


def test_the_shipped_curves_are_monotone_shares() -> None:
    shipped = calibration.load(calibration.CALIBRATION_FILE)
    assert {"greeting", "faq", "smalltalk"} <= set(shipped)
    for answer_types in shipped.values():
        for curve in answer_types.values():
            assert curve.fit == sorted(curve.fit) and curve.answers > 0


def test_a_bad_file_is_refused_naming_the_skill_and_answer_type(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps({"weather": {"forecast": {"raw": [0.2, 0.1], "fit": [0.1, 0.2], "answers": 3}}})
    )
    with pytest.raises(calibration.BadCalibration) as error:
        calibration.load(path)
    assert "weather.forecast" in str(error.value) and "increasing order" in str(error.value)
