"""The served agent (agent.api.serve) keeps what it made to start out of the garbage
collector's reach while it serves (a full collection would walk every model and index of
its in-process services in the middle of a turn), walks its young objects less often (a
young collection fell on nearly every LLM turn's way to its request), and gives both back
when it stops."""

from __future__ import annotations

import gc
from pathlib import Path

import httpx
import pytest

from agent.api.app import YOUNG_THRESHOLD, create_app
from agent.settings import Settings
from tests.support.servers import serving


@pytest.mark.parametrize("own_process", [True, False])
def test_the_served_agent_freezes_its_start_up_heap_while_it_serves(
    tmp_path: Path, own_process: bool
) -> None:
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        '{"services": {"skills": {"echo": '
        '{"connector": {"module": "tests.support.in_process:make_echo"}}}}}'
    )
    settings = Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline)
    before = gc.get_freeze_count()  # what a library of the test process froze, if any
    thresholds = gc.get_threshold()
    with serving(create_app(settings, own_process=own_process)) as agent:
        assert httpx.get(f"{agent.url}/ping").status_code == 200
        frozen = gc.get_freeze_count()
        serving_thresholds = gc.get_threshold()
    if own_process:
        assert frozen > before + 10_000  # the process's whole heap, models included
        assert serving_thresholds == (YOUNG_THRESHOLD, *thresholds[1:])
        assert gc.get_freeze_count() == 0
    else:  # an agent among others (tests, an embedding program) leaves the heap alone
        assert frozen == gc.get_freeze_count() == before
        assert serving_thresholds == thresholds
    assert gc.get_threshold() == thresholds
