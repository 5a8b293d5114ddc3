"""Loading a dp-agent file: recognised by content, every bad entry named; batching as
dp-agent does it, against a real HTTP service."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agent.connectors.batching import Batcher
from agent.connectors.http import make_transport
from agent.dream.config import HttpConnectorConfig, is_dp_agent_config
from agent.dream.connectors import DreamHttpConnector
from agent.dream.dialog import CountedList
from agent.dream.kind import DreamKind
from agent.kinds import load_any_pipeline
from agent.pipeline.kind import ChorusKind
from agent.turn.base import LoadedPipeline
from agent.turn.config import PipelineConfigError
from tests.dream import services as dream
from tests.dream.services import Recorder
from tests.dream.test_dream_pipeline import F
from tests.support.servers import serving

BASE: dict[str, Any] = {
    "connectors": {"shared": {"protocol": "http", "url": "http://127.0.0.1:1/respond"}},
    "services": {
        "annotators": {
            "spelling": {
                "connector": "shared",
                "dialog_formatter": f"{F}:last_utt",
                "state_manager_method": "add_annotation",
            }
        },
        "skills": {
            "eliza": {
                "connector": {"protocol": "http", "url": "http://127.0.0.1:1/respond"},
                "dialog_formatter": f"{F}:eliza_like",
                "response_formatter": f"{F}:skill_pair",
                "previous_services": ["annotators"],
                "state_manager_method": "add_hypothesis",
            }
        },
    },
    "metadata": {"display_name": "test"},
}


def load(tmp_path: Path, data: dict[str, Any]) -> LoadedPipeline:
    path = tmp_path / "pipeline_conf.json"
    path.write_text(json.dumps(data))
    return load_any_pipeline(path)


def test_the_format_is_recognised_by_content(tmp_path: Path) -> None:
    pipeline = load(tmp_path, BASE)
    assert isinstance(pipeline, DreamKind)
    assert [n.name for n in pipeline.graph.nodes] == ["annotators.spelling", "skills.eliza"]
    assert pipeline.graph.nodes[1].depends_on == {"annotators.spelling"}
    chorus = load(
        tmp_path,
        {"services": {"skills": {"s": {"connector": {"url": "http://127.0.0.1:1/respond"}}}}},
    )
    assert isinstance(chorus, ChorusKind)
    assert not is_dp_agent_config({"services": {"skills": {}}})


def change(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "services.skills.eliza.connector",
            "nowhere",
            "services.skills.eliza.connector: no connector 'nowhere'",
        ),
        (
            "services.skills.eliza.dialog_formatter",
            "tests.dream.formatters:missing",
            "services.skills.eliza.dialog_formatter: module 'tests.dream.formatters' has no "
            "'missing'",
        ),
        (
            "services.skills.eliza.response_formatter",
            "no_such_module.x:f",
            "services.skills.eliza.response_formatter: cannot import 'no_such_module.x'",
        ),
        (
            "services.skills.eliza.state_manager_method",
            "add_everything",
            "services.skills.eliza.state_manager_method",
        ),
        (
            "services.skills.eliza.connector",
            {"protocol": "AMQP"},
            "services.skills.eliza.connector.protocol: 'AMQP' is not supported",
        ),
        (
            "services.skills.eliza.connector",
            {"protocol": "http"},
            "services.skills.eliza.connector: missing url",
        ),
        (
            "services.skills.eliza.connector",
            {"protocol": "python", "class_name": "NoSuch"},
            "services.skills.eliza.connector.class_name: 'NoSuch' is not one of dp-agent's",
        ),
        (
            "services.skills.eliza.connector",
            {"protocol": "python", "class_name": "PredefinedTextConnector", "wrong": 1},
            "services.skills.eliza.connector.class_name: PredefinedTextConnector(...) failed",
        ),
        ("services.skills.eliza.tags", ["selectorr"], "services.skills.eliza.tags.0"),
        ("services.skills.eliza.previous_services", ["skills"], "cannot wait for itself"),
        ("services.skills.eliza.timeout", 3, "services.skills.eliza.timeout: Extra inputs"),
        ("connectors.shared.url", "not a url", "connectors.shared.url"),
    ],
)
def test_a_bad_entry_stops_the_agent_naming_it(
    tmp_path: Path, path: str, value: Any, message: str
) -> None:
    with pytest.raises(PipelineConfigError) as error:
        load(tmp_path, change(path, value))
    assert message in str(error.value)
    assert "pipeline_conf.json" in str(error.value)


def test_a_cycle_is_spelled_out_as_in_chorus_pipelines(tmp_path: Path) -> None:
    data = change("services.annotators.spelling.previous_services", ["skills.eliza"])
    with pytest.raises(PipelineConfigError) as error:
        load(tmp_path, data)
    assert (
        "cycle in the pipeline: services.annotators.spelling -> services.skills.eliza "
        "-> services.annotators.spelling"
    ) in str(error.value)


def test_a_name_reused_in_two_groups_is_kept_apart(tmp_path: Path) -> None:
    data = copy.deepcopy(BASE)
    data["services"]["response_annotators"] = {
        "spelling": {**data["services"]["annotators"]["spelling"], "previous_services": ["skills"]}
    }
    pipeline = load(tmp_path, data)
    assert isinstance(pipeline, DreamKind)
    assert [n.name for n in pipeline.graph.nodes] == [
        "annotators.spelling",
        "skills.eliza",
        "response_annotators.spelling",
    ]
    assert {n.label for n in pipeline.graph.nodes} == {"spelling", "eliza"}


def test_counted_lists_keep_the_true_length_through_copies() -> None:
    window = CountedList([{"text": "c"}, {"text": "d"}], total=4)
    assert len(window) == 4
    assert window[-1] == {"text": "d"}
    assert len(copy.deepcopy(window)) == 4
    assert json.loads(json.dumps(window)) == [{"text": "c"}, {"text": "d"}]


def test_batching_merges_payloads_and_splits_answers() -> None:
    log = Recorder()

    async def run(url: str) -> list[tuple[Any, int]]:
        transport = make_transport()
        try:
            config = HttpConnectorConfig(protocol="http", url=f"{url}/respond", batch_size=8)
            http = DreamHttpConnector("lengths", config, transport, 5.0)
            batcher = Batcher(http, 8)
            sized = await asyncio.gather(
                *(batcher.submit({"sentences": ["x" * n]}) for n in (1, 2, 3))
            )
            return list(sized)
        finally:
            await transport.aclose()

    with serving(dream.lengths(recorder=log)) as server:
        sized = asyncio.run(run(server.url))
    assert log.requests == [{"sentences": ["x", "xx", "xxx"]}]
    assert sized == [({"length": 1}, 3), ({"length": 2}, 3), ({"length": 3}, 3)]


def test_dp_agents_default_modules_name_formatters_and_connectors(tmp_path: Path) -> None:
    pipeline = load(
        tmp_path,
        {
            "formatters_module": "tests.dream.formatters",
            "connectors_module": "tests.dream.connectors",
            "services": {
                "chooser": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "AnnotatorChooser",
                        "annotator_names": ["x"],
                    },
                    "dialog_formatter": "last_utt",
                    "tags": ["selector"],
                }
            },
        },
    )
    assert isinstance(pipeline, DreamKind)
    (node,) = pipeline.graph.nodes
    assert node.dialog_formatter is not None
    assert node.dialog_formatter.__name__ == "last_utt"
