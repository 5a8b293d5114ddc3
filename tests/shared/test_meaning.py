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


TEXTS = ["how are you", "Tell me a joke about cats", "restore a backup", "zxqv", ""]


def _in_a_fresh_process(script: str) -> str:
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True
    )
    return ran.stdout


def test_the_table_read_from_the_packages_file_embeds_as_the_package_loads_it() -> None:
    """The model's table is read where the package's file holds it, not copied into the
    process: the same figures as the package's own loading, so every embedding is the
    same, and the mapped table cannot be changed by a caller."""
    import wordllama
    from wordllama import WordLlama

    folder = Path(wordllama.__file__).parent
    loaded = WordLlama.load(cache_dir=folder, disable_download=True).embedding
    mapped = meaning.mapped_table(folder / meaning.WEIGHTS, loaded.shape)
    assert mapped is not None and not mapped.flags.writeable
    assert np.array_equal(mapped.astype(np.float32), loaded)
    # after a start-up's batch gives the table's pages back, they read the same again
    batch = [f"{text} {n}" for n in range(meaning.RELEASE_FROM) for text in TEXTS]
    first = meaning.embed(batch)
    assert np.array_equal(meaning.embed(batch), first)
    assert np.array_equal(meaning.embed(TEXTS), meaning.embed([*TEXTS, *batch])[: len(TEXTS)])


def test_without_the_packages_file_the_model_is_held_in_memory_and_embeds_the_same() -> None:
    """A package whose file is elsewhere, cut short or of another layout: the table is a
    copy in memory, as before, and the embeddings are the same figures."""
    script = (
        "from pathlib import Path\n"
        "from shared import meaning\n"
        "meaning.WEIGHTS = Path('weights/absent.safetensors')\n"
        f"print(meaning.embed({TEXTS!r}).tobytes().hex())\n"
        "print(meaning._model().embedding.flags.writeable)\n"
    )
    held, writeable = _in_a_fresh_process(script).split()
    assert bytes.fromhex(held) == meaning._embedded(TEXTS).tobytes()
    assert writeable == "True"


def test_a_file_cut_short_or_of_another_layout_is_not_read_as_the_table(tmp_path: Path) -> None:
    import wordllama

    real = (Path(wordllama.__file__).parent / meaning.WEIGHTS).read_bytes()
    shape = (32000, 256)
    header = real[8 : 8 + int.from_bytes(real[:8], "little")]
    data = real[8 + len(header) :]
    cases = {
        "cut.safetensors": real[: len(real) // 2],
        "empty.safetensors": b"",
        "garbage.safetensors": b"\xff" * 64,
        "huge-header.safetensors": (1 << 62).to_bytes(8, "little") + real[8:],
        "float32.safetensors": real[:8] + header.replace(b'"F16"', b'"F32"') + data,
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        assert meaning.mapped_table(tmp_path / name, shape) is None, name
    assert meaning.mapped_table(tmp_path / "absent.safetensors", shape) is None
    (tmp_path / "whole.safetensors").write_bytes(real)
    assert meaning.mapped_table(tmp_path / "whole.safetensors", (16000, 512)) is None
    assert meaning.mapped_table(tmp_path / "whole.safetensors", shape) is not None


def test_a_start_ups_batch_leaves_few_of_the_tables_pages_in_the_process() -> None:
    """The services embed their examples at start-up, which reads nearly all of the
    table; its pages are given back after such a batch, and a turn's text reads only its
    own tokens' rows again (Linux's ``/proc/self/smaps`` counts them)."""
    if not Path("/proc/self/smaps").exists():
        return
    script = (
        "from pathlib import Path\n"
        "from shared import meaning\n"
        "def table_kb(field):\n"
        "    kb, inside = 0, False\n"
        "    for line in Path('/proc/self/smaps').read_text().splitlines():\n"
        "        if '-' in line.split()[0] and not line.split()[0].endswith(':'):\n"
        "            inside = line.endswith('.safetensors')\n"
        "        elif inside and line.startswith(field + ':'):\n"
        "            kb += int(line.split()[1])\n"
        "    return kb\n"
        "words = Path('README.md').read_text().split()\n"
        "meaning.embed([' '.join(words[i : i + 12]) for i in range(0, len(words), 12)])\n"
        "print(table_kb('Rss'))\n"
        "meaning.embed(['how are you doing today'])\n"
        "print(table_kb('Rss'), table_kb('Size'))\n"
    )
    after_batch, after_turn, table = (int(kb) for kb in _in_a_fresh_process(script).split())
    assert after_batch == 0
    # its five tokens' rows, and around each the pages the system maps with it: 320 kB of
    # the 16 MB table on a quiet machine (64 kB around each row), 1,280 kB seen during the
    # full suite (what the kernel reads ahead and maps depends on its page cache and
    # settings); a quarter of the table at most anywhere, where the batch's pages left in
    # place would be all of it
    assert 0 < after_turn <= table // 4
