"""The reading's file (shared/reading.json): what the served side reads from it.

The reading became a network of one hidden layer, then three of them averaged; an
operator's file refitted before that (a logistic regression per label, no hidden layer)
must keep reading the same after an upgrade, and a file of the wrong shape must say which
field is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.reading import fit_reading
from bench.routing import Observed
from shared.reading import READING_FILE, BadReading, feature_count, load, probabilities

INTENTS = ["greeting", "thanks"]
WIDTH = feature_count(INTENTS)


def labelled(conversation: str, fits: list[str]) -> Observed:
    """A conversation's one turn and the labels that fit it: all a fit reads of a turn
    beside its features."""
    return Observed(
        conversation=conversation,
        place=1,
        text="",
        fits=fits,
        skill="",
        answer="",
        llm_asked=False,
        hypotheses=[],
    )


def test_a_file_fitted_before_the_hidden_layer_reads_as_a_regression_per_label(
    tmp_path: Path,
) -> None:
    weights = [[0.0] * WIDTH, [0.0] * WIDTH]
    weights[0][0], weights[1][3] = 2.0, -1.5
    path = tmp_path / "reading.json"
    path.write_text(
        json.dumps(
            {
                "labels": ["smalltalk", "llm"],
                "intents": INTENTS,
                "weights": weights,
                "bias": [0.5, -0.25],
                "combiners": {},
                "turns": 40,
            }
        )
    )
    row = np.zeros(WIDTH, dtype=np.float32)
    row[0], row[3] = 1.0, 2.0
    read = probabilities(load(path), row)
    assert read["smalltalk"] == pytest.approx(1 / (1 + math.exp(-2.5)), abs=1e-4)
    assert read["llm"] == pytest.approx(1 / (1 + math.exp(3.25)), abs=1e-4)


def hidden_layer_file(tmp_path: Path, hidden: list[Any]) -> Path:
    """A reading file of one label whose hidden layer is ``hidden``, its other weights
    sized to ``hidden``'s units (one for a bare row)."""
    units = len(hidden) if isinstance(hidden[0], list) else 1
    path = tmp_path / "reading.json"
    path.write_text(
        json.dumps(
            {
                "labels": ["llm"],
                "intents": INTENTS,
                "hidden": hidden,
                "hidden_bias": [0.0] * units,
                "weights": [[1.0] * units],
                "bias": [0.0],
                "combiners": {},
                "turns": 1,
            }
        )
    )
    return path


def test_a_hidden_layer_of_the_wrong_width_is_named(tmp_path: Path) -> None:
    path = hidden_layer_file(tmp_path, [[0.0] * (WIDTH - 1)])
    with pytest.raises(BadReading, match=f"each row of hidden needs {WIDTH} values"):
        load(path)


@pytest.mark.parametrize(
    "hidden",
    [
        [[0.0] * WIDTH, [0.0] * (WIDTH - 1)],  # one row shorter
        [[0.0] * (WIDTH - 1) + ["x"]],  # a word among the numbers
        [[0.0] * (WIDTH - 1) + [float("nan")]],
        [0.0] * WIDTH,  # a row, not rows
    ],
)
def test_weights_that_are_no_table_of_numbers_are_refused_naming_the_field(
    tmp_path: Path, hidden: list[Any]
) -> None:
    with pytest.raises(BadReading, match=r"hidden\n.*needs a list of rows of numbers"):
        load(hidden_layer_file(tmp_path, hidden))


def test_the_shipped_file_read_and_written_again_is_the_same_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The served reading holds its weights as arrays, not as lists of Python floats (13 MB
    of each process that reads the file, 6 MB now): a refit that writes the same weights
    gives the same file, as ``bench.calibrate`` promises."""
    path = tmp_path / "reading.json"
    path.write_text(load(READING_FILE).model_dump_json() + "\n")
    assert path.read_bytes() == READING_FILE.read_bytes()


def test_the_served_network_reads_what_it_learned_including_what_two_features_say_together(
    tmp_path: Path,
) -> None:
    """The label is small talk's where two features agree (both on or both off), the LLM's
    where they differ: no weight per feature says that, a hidden layer does. Served from
    the file (the standardisation folded into its weights), the reading tells them apart
    on turns it was not fitted on."""
    generator = np.random.default_rng(7)

    def turns_and_rows(count: int, start: int) -> tuple[list[Observed], np.ndarray]:
        rows = np.full((count, WIDTH), 3.0, dtype=np.float32)  # a feature that never moves
        first = generator.integers(0, 2, size=count)
        second = generator.integers(0, 2, size=count)
        rows[:, 0] = 10.0 + 4.0 * first  # far from 0 and 1: the scaling must be folded in
        rows[:, 1] = -2.0 + 0.1 * second
        turns = [
            labelled(f"c{start + i}", ["smalltalk" if a == b else "llm"])
            for i, (a, b) in enumerate(zip(first, second, strict=True))
        ]
        return turns, rows

    fitted_turns, fitted_rows = turns_and_rows(600, 0)
    model = fit_reading(fitted_rows, fitted_turns, INTENTS)
    assert model is not None and model.hidden is not None
    path = tmp_path / "reading.json"
    path.write_text(model.model_dump_json())
    served = load(path)
    new_turns, new_rows = turns_and_rows(200, 600)
    right = sum(
        (probabilities(served, row)["smalltalk"] > 0.5) == ("smalltalk" in turn.fits)
        for turn, row in zip(new_turns, new_rows, strict=True)
    )
    assert right >= 0.9 * len(new_turns)


def test_a_label_every_turn_fits_is_read_as_sure() -> None:
    """An operator's set whose every turn fits their skill says nothing else of it: the
    reading is sure of it on any turn, as the regression per label was, not the
    penalised network's guess."""
    rows = np.full((60, WIDTH), 3.0, dtype=np.float32)
    rows[:, 0] = np.random.default_rng(3).normal(size=60)
    turns = [labelled(f"c{i}", ["weather", "faq"] if i % 2 else ["weather"]) for i in range(60)]
    model = fit_reading(rows, turns, INTENTS)
    assert model is not None and model.labels == ["faq", "weather"]
    assert probabilities(model, rows[0])["weather"] > 0.999


def noisy_turns(count: int, start: int) -> tuple[list[Observed], np.ndarray]:
    """Turns whose label follows two features but one in five times not: the kind of set
    on which two random starts of a network end in different readings."""
    generator = np.random.default_rng(start)
    rows = generator.normal(size=(count, WIDTH)).astype(np.float32)
    said = (rows[:, 0] + rows[:, 1] > 0) != (generator.random(count) < 0.2)
    turns = [
        labelled(f"c{start + i}", ["smalltalk" if fits else "llm"]) for i, fits in enumerate(said)
    ]
    return turns, rows


def test_the_served_reading_is_its_networks_log_odds_averaged(tmp_path: Path) -> None:
    """One file holds every start's network, and what it serves is their average."""
    turns, rows = noisy_turns(150, 0)
    _, new_rows = noisy_turns(50, 1000)
    together = fit_reading(rows, turns, INTENTS, seeds=(0, 1, 2))
    alone = [fit_reading(rows, turns, INTENTS, seeds=(seed,)) for seed in (0, 1, 2)]
    assert together is not None and all(model is not None for model in alone)
    path = tmp_path / "reading.json"
    path.write_text(together.model_dump_json())
    served = load(path)
    for row in new_rows:
        read = probabilities(served, row)["smalltalk"]
        each = [probabilities(model, row)["smalltalk"] for model in alone if model is not None]
        mean_log_odds = sum(math.log(p / (1 - p)) for p in each) / len(each)
        assert math.log(read / (1 - read)) == pytest.approx(mean_log_odds, abs=0.02)


def test_a_refit_from_other_starts_reads_new_turns_closer_than_one_network_does() -> None:
    """Why several starts: refitted on the same turns from other random starts, the
    averaged reading changes less than its networks do one by one, so a refit's figures
    say more about the set than about its luck."""
    turns, rows = noisy_turns(150, 0)
    _, new_rows = noisy_turns(200, 1000)

    def spread(first: tuple[int, ...], second: tuple[int, ...]) -> float:
        a = fit_reading(rows, turns, INTENTS, seeds=first)
        b = fit_reading(rows, turns, INTENTS, seeds=second)
        assert a is not None and b is not None
        return float(
            np.mean(
                [
                    abs(probabilities(a, r)["smalltalk"] - probabilities(b, r)["smalltalk"])
                    for r in new_rows
                ]
            )
        )

    one_by_one = np.mean([spread((seed,), (seed + 3,)) for seed in (0, 1, 2)])
    assert spread((0, 1, 2), (3, 4, 5)) < 0.8 * one_by_one


def test_the_reading_tells_word_order_apart_through_its_pairs_of_words(tmp_path: Path) -> None:
    """ "is it ok to nap" asks what only the LLM can weigh; "it is ok to nap" says
    something small talk can take. Their words are the same, so their averaged meanings
    are too, and a reading of the meaning alone reads them alike; the pairs of words
    ("<s> is", "it is") tell them apart, in the served file, on verbs it never saw."""
    from shared.reading import features, grams_of

    verbs = [
        "nap", "run", "swim", "cook", "bake", "draw", "read", "knit", "paint", "dance",
        "cycle", "hike", "fish", "ski", "skate", "surf", "sew", "garden", "camp", "climb",
    ]  # fmt: skip
    said = [(f"is it ok to {v}", "llm") for v in verbs] + [
        (f"it is ok to {v}", "smalltalk") for v in verbs
    ]
    turns = [labelled(f"c{i}", [label]) for i, (_, label) in enumerate(said)]
    grams = sorted({g for text, _ in said for g in grams_of(text)})
    index = {g: i for i, g in enumerate(grams)}

    def served(with_grams: bool) -> Callable[[str], dict[str, float]]:
        rows = np.vstack(
            [features(text, None, {}, INTENTS, None, index if with_grams else None)
             for text, _ in said]
        )  # fmt: skip
        model = fit_reading(rows, turns, INTENTS, grams=grams if with_grams else ())
        assert model is not None
        path = tmp_path / f"reading-{with_grams}.json"
        path.write_text(model.model_dump_json())
        loaded = load(path)
        return lambda text: probabilities(
            loaded, features(text, None, {}, INTENTS, None, loaded.gram_index())
        )

    read = served(with_grams=True)
    asked, stated = read("is it ok to sing"), read("it is ok to sing")
    assert asked["llm"] > 0.5 > stated["llm"]
    assert stated["smalltalk"] > 0.5 > asked["smalltalk"]
    alike = served(with_grams=False)
    assert alike("is it ok to sing") == alike("it is ok to sing")


def test_a_file_naming_a_word_twice_is_refused(tmp_path: Path) -> None:
    """Each word of ``grams`` is one feature: a file holding one twice would read the
    features after it one place off."""
    path = tmp_path / "reading.json"
    path.write_text(
        json.dumps(
            {
                "labels": ["llm"],
                "intents": INTENTS,
                "weights": [[0.0] * (WIDTH + 2)],
                "bias": [0.0],
                "combiners": {},
                "turns": 1,
                "grams": ["<s> is", "<s> is"],
            }
        )
    )
    with pytest.raises(BadReading, match="grams holds each word or pair once"):
        load(path)
