"""Both kinds of pipeline answer what the layers above ask (agent.pipeline.engine), so the
API, readiness and the pages work alike whichever kind the pipeline file is.

The typed assignments are the check that each kind satisfies the protocols: mypy (strict,
over the tests too) refuses them if a method or property is missing or of another type.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from agent.connectors.http import make_http_client
from agent.dream.executor import DreamExecutor
from agent.dream.graph import DreamPipeline, build_dream_pipeline
from agent.dream.loading import load_any_pipeline
from agent.metrics.services import ServiceStats
from agent.pipeline.config import parse_pipeline_config
from agent.pipeline.engine import LoadedPipeline, TurnExecutor
from agent.pipeline.executor import Executor
from agent.pipeline.graph import Pipeline, build_pipeline
from agent.state.limits import StorageLimits
from tests.dream.test_dream_pipeline import F

CHORUS: dict[str, Any] = {
    "services": {
        "annotators": {"tokens": {"connector": {"url": "http://127.0.0.1:1/respond"}}},
        "skills": {
            "greeting": {
                "connector": {"url": "http://127.0.0.1:2/respond"},
                "required_previous_services": ["tokens"],
            }
        },
        "response_selectors": {"pick": {"connector": {"builtin": "highest_confidence"}}},
    }
}
DREAM: dict[str, Any] = {
    "services": {
        "annotators": {
            "spelling": {
                "connector": {"protocol": "http", "url": "http://127.0.0.1:3/respond"},
                "dialog_formatter": f"{F}:last_utt",
                "state_manager_method": "add_annotation",
            }
        },
        "skills": {
            "eliza": {
                "connector": {"protocol": "http", "url": "http://127.0.0.1:4/respond"},
                "dialog_formatter": f"{F}:eliza_like",
                "response_formatter": f"{F}:skill_pair",
                "required_previous_services": ["annotators"],
                "state_manager_method": "add_hypothesis",
            }
        },
        "last_chance_service": {
            "connector": {
                "protocol": "python",
                "class_name": "PredefinedTextConnector",
                "response_text": "Sorry",
            },
            "state_manager_method": "add_bot_utterance_last_chance",
            "tags": ["last_chance"],
        },
    }
}


def test_both_kinds_satisfy_the_protocols() -> None:
    chorus: LoadedPipeline = build_pipeline(parse_pipeline_config(CHORUS))
    dream: LoadedPipeline = build_dream_pipeline(DREAM)
    assert [type(chorus), type(dream)] == [Pipeline, DreamPipeline]


async def test_each_kind_builds_its_own_executor() -> None:
    client = make_http_client()
    try:
        for pipeline, kind in (
            (build_pipeline(parse_pipeline_config(CHORUS)), Executor),
            (build_dream_pipeline(DREAM), DreamExecutor),
        ):
            async with AsyncExitStack() as closing:
                executor: TurnExecutor = pipeline.executor(
                    client, closing, channel_type="telegram", limits=StorageLimits()
                )
                assert isinstance(executor, kind) and executor.pipeline is pipeline
    finally:
        await client.close()


def test_both_kinds_name_their_services_urls_and_requirements(tmp_path: Path) -> None:
    """What readiness and metrics read; a dp-agent pipeline's last-chance service is called
    (metrics count it) but not part of the graph (readiness does not wait for it)."""
    found = []
    for name, data in (("chorus.json", CHORUS), ("pipeline_conf.json", DREAM)):
        path = tmp_path / name
        path.write_text(json.dumps(data))
        pipeline = load_any_pipeline(path)
        found.append(
            (
                pipeline.service_names(),
                pipeline.service_names(fallbacks=True),
                pipeline.service_urls(),
                pipeline.required_names(),
            )
        )
    assert found == [
        (
            ["tokens", "greeting", "pick"],
            ["tokens", "greeting", "pick"],
            {"tokens": "http://127.0.0.1:1/respond", "greeting": "http://127.0.0.1:2/respond"},
            {"tokens"},
        ),
        (
            ["annotators.spelling", "skills.eliza"],
            ["annotators.spelling", "skills.eliza", "last_chance_service"],
            {
                "annotators.spelling": "http://127.0.0.1:3/respond",
                "skills.eliza": "http://127.0.0.1:4/respond",
            },
            {"annotators.spelling"},
        ),
    ]


def test_both_kinds_describe_themselves_for_the_pipeline_page() -> None:
    stats = ServiceStats()
    chorus = build_pipeline(parse_pipeline_config(CHORUS)).describe(stats)
    dream = build_dream_pipeline(DREAM).describe(stats)
    assert [s.name for s in chorus.services] == ["tokens", "greeting", "pick"]
    assert [s.name for s in dream.services] == [
        "annotators.spelling",
        "skills.eliza",
        "last_chance_service",
    ]
    assert [e.required for e in chorus.edges if e.target == "greeting"] == [True]
    assert chorus.mermaid.startswith("flowchart LR") and dream.mermaid.startswith("flowchart LR")
