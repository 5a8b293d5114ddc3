"""Both kinds of pipeline answer what the layers above ask (agent.turn.base), so the
API, readiness and the pages work alike whichever kind the pipeline file is.

The typed assignments are the check that each kind satisfies the protocols: mypy (strict,
over the tests too) refuses them if a method or property is missing or of another type.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from agent.connectors.http import make_transport
from agent.dream.executor import DreamExecutor
from agent.dream.graph import DreamPipeline, build_dream_pipeline
from agent.dream.kind import DreamKind
from agent.kinds import load_any_pipeline
from agent.metrics.services import ServiceStats
from agent.pipeline.config import parse_pipeline_config
from agent.pipeline.executor import Executor
from agent.pipeline.graph import Pipeline, build_pipeline
from agent.pipeline.kind import ChorusKind
from agent.state.storage_limits import StorageLimits
from agent.turn.base import LoadedPipeline, PipelineGraph, TurnExecutor
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
    chorus, dream = build_pipeline(parse_pipeline_config(CHORUS)), build_dream_pipeline(DREAM)
    graphs: list[PipelineGraph] = [chorus, dream]
    kinds: list[LoadedPipeline] = [ChorusKind(chorus), DreamKind(dream)]
    assert [type(graph) for graph in graphs] == [Pipeline, DreamPipeline]
    assert [kind.dialect for kind in kinds] == ["chorus", "dp-agent"]


async def test_each_kind_builds_its_own_executor() -> None:
    transport = make_transport()
    try:
        for pipeline, kind in (
            (ChorusKind(build_pipeline(parse_pipeline_config(CHORUS))), Executor),
            (DreamKind(build_dream_pipeline(DREAM)), DreamExecutor),
        ):
            async with AsyncExitStack() as closing:
                executor: TurnExecutor = await pipeline.executor(
                    transport, closing, channel_type="telegram", limits=StorageLimits()
                )
                assert isinstance(executor, kind) and executor.pipeline is pipeline.graph
    finally:
        await transport.aclose()


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
    chorus = ChorusKind(build_pipeline(parse_pipeline_config(CHORUS))).describe(stats)
    dream = DreamKind(build_dream_pipeline(DREAM)).describe(stats)
    assert [s.name for s in chorus.services] == ["tokens", "greeting", "pick"]
    assert [s.name for s in dream.services] == [
        "annotators.spelling",
        "skills.eliza",
        "last_chance_service",
    ]
    assert [e.required for e in chorus.edges if e.target == "greeting"] == [True]
    assert chorus.mermaid.startswith("flowchart LR") and dream.mermaid.startswith("flowchart LR")


def test_each_kind_says_what_chorus_run_starts(tmp_path: Path) -> None:
    """A Chorus service on a local URL whose folder is in the repository is started, one
    elsewhere must already run, one switched off is shown as off; a dp-agent pipeline's
    services run from Dream's compose files, and ``chorus run`` says so."""
    (tmp_path / "skills" / "greeting").mkdir(parents=True)
    (tmp_path / "skills" / "greeting" / "app.py").write_text("")
    services = json.loads(json.dumps(CHORUS["services"]))
    services["skills"]["quiet"] = {
        "connector": {"url": "http://127.0.0.1:5/respond"},
        "is_enabled": False,
    }
    chorus = ChorusKind(build_pipeline(parse_pipeline_config({**CHORUS, "services": services})))
    local = chorus.local_services(tmp_path)
    assert [(s.name, s.module, s.port) for s in local.startable] == [
        ("greeting", "skills.greeting.app:app", 2)
    ]
    assert local.elsewhere == ["tokens (http://127.0.0.1:1/respond)"]
    assert [name for name, _ in local.off] == ["quiet"]
    assert local.note is None
    dream = DreamKind(build_dream_pipeline(DREAM)).local_services(tmp_path)
    assert not dream.startable and not dream.elsewhere
    assert dream.note is not None and "Dream's compose files" in dream.note
