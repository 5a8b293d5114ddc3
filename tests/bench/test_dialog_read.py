"""bench/dialog_read.py as its user runs it, with few reads: the shipped pipeline's dialog
stored, its window read whole and as shown, the figures written."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import run_module, unmeasured_environment


def test_the_benchmark_reads_the_window_whole_and_as_shown_and_writes_its_figures(
    tmp_path: Path,
) -> None:
    out = tmp_path / "dialog_read.json"
    result = run_module(
        "bench.dialog_read",
        *("--reads", "3", "--blocks", "2", "--out", str(out)),
        env=unmeasured_environment("CHORUS_", "LLM_"),  # as a user runs it, untraced
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    whole, shown = figures["window_bytes"]["whole"], figures["window_bytes"]["as_shown"]
    assert len(whole) == len(shown) == 12  # the shipped pipeline's widest window
    # every utterance is smaller as shown: its profile snapshot at least is left out
    assert all(0 < small < big for small, big in zip(shown, whole, strict=True))
    for way in ("whole", "as_shown"):
        assert len(figures["sqlite"][way]["blocks_cpu_us"]) == 2
        assert figures["sqlite"][way]["median_wall_us"] > 0
    assert "mongodb" not in figures  # asked for with --mongo only
