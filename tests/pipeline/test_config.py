"""Pipeline config validation: each bad case stops the agent with its own message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.pipeline.config import load_pipeline_config, parse_pipeline_config
from agent.pipeline.graph import build_pipeline
from agent.turn.config import PipelineConfigError


def svc(port: int = 9000, **extra: Any) -> dict[str, Any]:
    return {"connector": {"url": f"http://127.0.0.1:{port}/respond"}, **extra}


def check(services: dict[str, Any], **top: Any) -> None:
    build_pipeline(parse_pipeline_config({"services": services, **top}))


def refused(services: dict[str, Any], **top: Any) -> str:
    with pytest.raises(PipelineConfigError) as error:
        check(services, **top)
    return str(error.value)


def test_a_sound_pipeline_orders_groups_and_previous_services() -> None:
    pipeline = build_pipeline(
        parse_pipeline_config(
            {
                "services": {
                    "annotators": {"b": svc(previous_services=["a"]), "a": svc()},
                    "skills": {"s1": svc(context_window=5), "s2": svc()},
                    "response_selectors": {"rs": {"connector": {"builtin": "highest_confidence"}}},
                }
            }
        )
    )
    order = [n.name for n in pipeline]
    assert order.index("a") < order.index("b") < order.index("s1") < order.index("rs")
    nodes = {n.name: n for n in pipeline}
    assert nodes["s1"].depends_on == {"a", "b"}
    assert nodes["rs"].depends_on == {"a", "b", "s1", "s2"}
    assert pipeline.history_window == 5


def test_unknown_service_is_named() -> None:
    message = refused({"skills": {"greet": svc(previous_services=["tokenz"])}})
    assert "services.skills.greet.previous_services: unknown service 'tokenz'" in message


def test_unknown_required_service_is_named() -> None:
    message = refused({"skills": {"greet": svc(required_previous_services=["ner"])}})
    assert "services.skills.greet.required_previous_services: unknown service 'ner'" in message


def test_a_cycle_is_spelled_out() -> None:
    message = refused(
        {
            "annotators": {
                "a": svc(previous_services=["b"]),
                "b": svc(previous_services=["a"]),
            }
        }
    )
    assert message.startswith("cycle in the pipeline:")
    assert "services.annotators.a -> services.annotators.b -> services.annotators.a" in message


def test_waiting_on_a_later_group_is_a_cycle() -> None:
    message = refused(
        {"annotators": {"a": svc(previous_services=["skills"])}, "skills": {"s": svc()}}
    )
    assert "cycle in the pipeline" in message and "services.skills.s" in message


def test_missing_url_names_the_connector() -> None:
    message = refused({"skills": {"greet": {"connector": {"timeout": 1}}}})
    assert "services.skills.greet.connector: missing url" in message


def test_url_and_builtin_together_are_refused() -> None:
    message = refused(
        {
            "response_selectors": {
                "rs": {"connector": {"url": "http://x/respond", "builtin": "highest_confidence"}}
            }
        }
    )
    assert "services.response_selectors.rs.connector: set only one of" in message


def test_a_dependency_on_a_disabled_service_is_named() -> None:
    message = refused(
        {
            "annotators": {"a": svc(is_enabled=False)},
            "skills": {"s": svc(required_previous_services=["a"])},
        }
    )
    assert "depends on 'a', which is off (is_enabled: false)" in message


def test_a_service_needing_an_unset_variable_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """An LLM skill stays out of the pipeline until its endpoint is configured."""
    monkeypatch.delenv("CHORUS_TEST_LLM_URL", raising=False)
    config = parse_pipeline_config(
        {"services": {"skills": {"llm": svc(requires_env=["CHORUS_TEST_LLM_URL"]), "other": svc()}}}
    )
    assert [n.name for n in build_pipeline(config).nodes] == ["other"]
    message = refused(
        {
            "skills": {
                "llm": svc(requires_env=["CHORUS_TEST_LLM_URL"]),
                "s": svc(required_previous_services=["llm"]),
            }
        }
    )
    assert "which is off (requires_env: CHORUS_TEST_LLM_URL not set)" in message
    monkeypatch.setenv("CHORUS_TEST_LLM_URL", "http://127.0.0.1:9/v1")
    assert [n.name for n in build_pipeline(config).nodes] == ["llm", "other"]


def test_a_bad_variable_name_is_named() -> None:
    assert "services.skills.s.requires_env.0" in refused(
        {"skills": {"s": svc(requires_env=["not a name"])}}
    )


def test_two_response_selectors_are_refused() -> None:
    message = refused({"response_selectors": {"one": svc(), "two": svc()}})
    assert "only one response selector may be enabled, found one, two" in message


def test_a_name_used_twice_is_refused() -> None:
    message = refused({"annotators": {"x": svc()}, "skills": {"x": svc()}})
    assert "services.skills.x: the name is already used in services.annotators" in message


def test_unknown_group_and_unknown_key_are_named() -> None:
    assert "services.skils" in refused({"skils": {"s": svc()}})
    assert "services.skills.s.timeout: Extra inputs are not permitted" in refused(
        {"skills": {"s": svc(timeout=3)}}
    )


def test_bad_values_are_named() -> None:
    message = refused({"skills": {"s": {"connector": {"url": "not a url", "timeout": -1}}}})
    assert "services.skills.s.connector.url" in message
    assert "services.skills.s.connector.timeout" in message


def test_an_in_process_service_s_threads_are_bounded_naming_the_key() -> None:
    entry = {"connector": {"module": "skills.smalltalk.app", "threads": 0}}
    message = refused({"skills": {"s": entry}})
    assert "services.skills.s.connector.threads" in message
    over_http = {"connector": {"url": "http://127.0.0.1:8101/respond", "threads": 2}}
    message = refused({"skills": {"s": over_http}})
    assert '"threads" bounds a service called in the agent\'s process' in message
    assert "services.skills.s.connector" in message


def test_the_file_is_named_when_it_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.json"
    path.write_text('{"services": {,}}')
    with pytest.raises(PipelineConfigError, match=r"pipeline.json: not valid JSON at line 1"):
        load_pipeline_config(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PipelineConfigError, match=r"cannot read pipeline config .*nope\.json"):
        load_pipeline_config(tmp_path / "nope.json")


def test_the_shipped_pipeline_is_valid() -> None:
    pipeline = build_pipeline(load_pipeline_config(Path("pipeline.json")))
    assert {n.role for n in pipeline} >= {"annotators", "skills", "response_selectors"}


def test_the_agent_refuses_to_start_with_a_bad_pipeline(tmp_path: Path) -> None:
    from agent.api.app import create_app
    from agent.settings import Settings

    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps({"services": {"skills": {"s": {"connector": {}}}}}))
    with pytest.raises(PipelineConfigError, match=r"services\.skills\.s\.connector: missing url"):
        create_app(Settings(db_url=f"sqlite:///{tmp_path}/x.db", pipeline=path))


def test_the_parlai_protocol_is_for_skills_only() -> None:
    message = refused(
        {
            "annotators": {
                "a": {"connector": {"url": "http://127.0.0.1:9/act", "protocol": "parlai"}}
            }
        }
    )
    assert 'services.annotators.a.connector.protocol: "parlai" is for skills only' in message


def test_the_double_texting_policy_is_checked_and_kept() -> None:
    services = {"skills": {"s": svc()}}
    message = refused(services, double_texting="shout")
    assert message.startswith("pipeline config: double_texting: Input should be 'enqueue'")
    config = parse_pipeline_config({"services": services, "double_texting": "interrupt"})
    assert build_pipeline(config).double_texting == "interrupt"
    default = parse_pipeline_config({"services": services})
    assert build_pipeline(default).double_texting == "enqueue"


@pytest.mark.parametrize(
    ("services", "message"),
    [
        (
            {"skills": {"llm": svc(tier=1)}},
            'services.skills.llm: "tier": 1 needs "run_below"',
        ),
        (
            {"skills": {"llm": svc(run_below=0.5)}},
            'services.skills.llm: "run_below" needs "tier" of 1 or more',
        ),
        (
            {"skills": {"llm": svc(speculative=True)}},
            'services.skills.llm: "speculative": true needs "tier" of 1 or more',
        ),
        (
            {
                "skills": {
                    "llm": svc(
                        stream=True,
                        tier=1,
                        run_below=0.5,
                        speculative=True,
                        stream_min_confidence=0.5,
                    )
                }
            },
            'services.skills.llm: "speculative": true cannot go with "stream_min_confidence"',
        ),
        (
            {"skills": {"llm": svc(budget={"per_user": 0})}},
            "services.skills.llm.budget.per_user: Input should be greater than or equal to 1",
        ),
        (
            {"annotators": {"ner": svc(tier=1, run_below=0.5)}},
            "services.annotators.ner.tier: tiers and token budgets are for skills only",
        ),
        (
            {"skills": {"llm": svc(budget={"per_week": 10})}},
            "services.skills.llm.budget.per_week: Extra inputs are not permitted",
        ),
        (
            {"skills": {"llm": svc(budget={"per_turn": 0})}},
            "services.skills.llm.budget.per_turn: Input should be greater than or equal to 1",
        ),
        (
            {
                "skills": {
                    "faq": svc(previous_services=["llm"]),
                    "llm": svc(tier=1, run_below=0.5),
                }
            },
            "services.skills.faq.previous_services: waits for 'llm', a skill of a higher tier",
        ),
    ],
)
def test_tiers_and_budgets_are_checked_naming_the_key(
    services: dict[str, Any], message: str
) -> None:
    assert message in refused(services)
