"""A dp-agent pipeline's turn has no deadline unless one is set, as dp-agent runs Dream
(``response_time_limit: 0``): a slow service is bounded by its own ``timeout``, and its
answer is the one the user gets. The agent runs on an event loop whose clock the test moves
forward, so "the skill took 15 s" takes no 15 s of the test's time."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.api.app import create_app
from agent.settings import Settings
from tests.dream import services as dream
from tests.dream.test_dream_behaviour import LAST_CHANCE, TIMEOUT
from tests.dream.test_dream_pipeline import F, http, say
from tests.support.clock import TravellingLoop
from tests.support.servers import serving

#: What the skill's answer takes, on the agent's clock: past the old 10 s default deadline,
#: well within the skill's own 120 s ``timeout``.
THINKING = 15.0


def pipeline(url: str) -> dict[str, Any]:
    return {
        "services": {
            "last_chance_service": LAST_CHANCE,
            "timeout_service": TIMEOUT,
            "skills": {
                "thinker": {
                    "connector": http(url, timeout=120.0),
                    "dialog_formatter": f"{F}:last_utt",
                    "response_formatter": f"{F}:skill_pair",
                    "state_manager_method": "add_hypothesis",
                }
            },
            "response_selectors": {
                "confidence": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "ConfidenceResponseSelectorConnector",
                    },
                    "previous_services": ["skills"],
                    "state_manager_method": "add_bot_utterance",
                }
            },
        }
    }


@pytest.mark.parametrize(
    ("settings", "answered_by"),
    [
        pytest.param({}, "thinker", id="no-setting"),
        pytest.param({"dream_turn_timeout": 0}, "thinker", id="zero-means-none"),
        pytest.param({"dream_turn_timeout": 12}, "timeout_service", id="a-setting-gives-one"),
    ],
)
def test_a_slow_skill_within_its_own_timeout_is_the_one_that_answers(
    services: Any, db_url: str, tmp_path: Path, settings: dict[str, Any], answered_by: str
) -> None:
    received, release = threading.Event(), threading.Event()
    path = tmp_path / "pipeline_conf.json"
    path.write_text(json.dumps(pipeline(services(dream.gated(received, release)).url)))
    loops: list[TravellingLoop] = []

    def loop() -> TravellingLoop:
        loops.append(TravellingLoop())
        return loops[-1]

    app = create_app(Settings(db_url=db_url, pipeline=path, **settings))
    with (
        serving(app, loop_factory=loop) as agent,
        httpx.Client(base_url=agent.url, timeout=60) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        try:
            pending = pool.submit(say, client, "think it over")
            assert received.wait(timeout=30), "the skill was never called"
            loops[0].travel(THINKING, then=release.set)
            reply = pending.result(timeout=60)
        finally:
            release.set()
    assert reply["active_skill"] == answered_by
    if answered_by == "thinker":
        assert reply["response"] == "I thought it over"
    else:
        assert reply["response"] == "Sorry, I need to think more on that."


def test_a_negative_turn_timeout_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent.settings import SettingsError, load_settings

    monkeypatch.setenv("CHORUS_DREAM_TURN_TIMEOUT", "-1")
    with pytest.raises(SettingsError, match="CHORUS_DREAM_TURN_TIMEOUT"):
        load_settings()
