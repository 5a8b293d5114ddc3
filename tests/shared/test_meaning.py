"""Similarity by meaning (shared.meaning): the packaged model, offline."""

import subprocess
import sys
from pathlib import Path

import numpy as np

from shared import meaning


def test_a_paraphrase_is_closer_in_meaning_than_a_question_sharing_its_words() -> None:
    rows = meaning.embed(["what is your age", "how are you doing"])
    age, how_are_you = meaning.similarities("How old are you?", rows)
    assert age > how_are_you + 0.1  # "how ... are you" shares its words with the other


def test_case_is_ignored() -> None:
    rows = meaning.embed(["how are you?"])
    assert meaning.similarities("HOW ARE YOU?", rows)[0] > 0.999


def test_an_empty_text_is_close_to_nothing() -> None:
    rows = meaning.embed(["", "hello"])
    assert np.isfinite(rows).all() and not rows[0].any()
    assert meaning.similarities("", rows).tolist() == [0.0, 0.0]
    assert meaning.embed([]).shape == (0, 256)


def test_a_text_weighed_again_scores_the_same_and_no_caller_can_change_it() -> None:
    """The intents annotator and the smalltalk skill weigh the same utterance: the second
    reads the first's row, which neither can alter for the other."""
    rows = meaning.embed(["how old are you", "do you like music"])
    first = meaning.similarities("Do you like sports?", rows)
    first += 1.0  # the scores are the caller's own
    again = meaning.similarities("Do you like sports?", rows)
    assert np.allclose(again, rows @ meaning.embed(["Do you like sports?"])[0])
    assert np.allclose(again, first - 1.0)


def test_one_text_embedded_is_the_cached_row_and_the_caller_may_change_its_copy() -> None:
    """The retrieval annotator embeds the utterance the intents annotator weighs: one text
    is read from the cache, the same figures as in a batch, and the caller's array is its
    own (a search that scales it changes no other service's scores)."""
    text = "how do I restore a backup"
    alone = meaning.embed([text])
    assert np.array_equal(alone[0], meaning.embed([text, "hello"])[0])
    alone *= 0.0
    assert meaning.similarities(text, meaning.embed([text]))[0] > 0.999


def test_the_model_loads_without_requests_which_is_still_there_if_used() -> None:
    """wordllama's import of requests (for downloads, disabled here) is deferred: a fresh
    process embeds without loading it, and the package's name for it still works."""
    script = (
        "import sys\n"
        "from shared import meaning\n"
        "assert meaning.embed(['hello']).shape == (1, 256)\n"
        "print(sorted(m for m in ('requests', 'urllib3') if m in sys.modules))\n"
        "import wordllama.wordllama as package\n"
        "print(package.requests.RequestException.__module__)\n"
        "print('requests' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    assert ran.stdout.split("\n")[:3] == ["[]", "requests.exceptions", "True"]
