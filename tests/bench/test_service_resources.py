"""``bench.service_resources`` runs each service it is given as its own process, loads it,
and writes every figure of each; an unknown service is refused by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import service_resources
from tests.support.processes import run_module, unmeasured_environment


@pytest.mark.timeout(120)
def test_the_quick_run_writes_every_figure_of_each_service(tmp_path: Path) -> None:
    done = run_module(
        "bench.service_resources",
        "--quick",
        "--services",
        "tokens,confidence",
        "--out",
        str(tmp_path),
        env=unmeasured_environment(),  # as a user runs it, not slowed by tracing
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "service_resources.json").read_text())
    assert report["quick"] is True
    rows = {row["service"]: row for row in report["services"]}
    assert list(rows) == ["tokens", "confidence"]
    assert rows["confidence"]["group"] == "response_selectors"
    for row in rows.values():
        assert row["requests"] == 40 and row["errors"] == 0
        # a Python process holds some memory, and never less at its peak than idle
        assert 0 < row["idle_rss_mib"] <= row["peak_rss_mib"]
        assert row["end_rss_mib"] <= row["peak_rss_mib"]
        assert row["cpu_s_per_1000"] >= 0
        assert 0 < row["p50_ms"] <= row["p95_ms"]
    assert "confidence" in done.stdout and "peak MiB" in done.stdout


def test_an_unknown_service_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its ``main`` in the test's process, as its command line gives it the arguments: the
    refusal is argparse's exit 2, before any service is started."""
    arguments = ["--services", "tokens,nosuch", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", ["bench.service_resources", *arguments])
    with pytest.raises(SystemExit) as refused:
        service_resources.main()
    assert refused.value.code == 2
    assert "--services: unknown nosuch" in capsys.readouterr().err
    assert not (tmp_path / "service_resources.json").exists()
