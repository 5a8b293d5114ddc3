"""Each dp-agent rule on its own, through the agent over HTTP."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.conftest import AgentFactory
from tests.dream import services as dream
from tests.dream.services import Recorder
from tests.dream.test_dream_pipeline import F, dialog_of, http, say

LAST_CHANCE = {
    "connector": {
        "protocol": "python",
        "class_name": "PredefinedTextConnector",
        "response_text": "Sorry, something went wrong inside.",
    },
    "state_manager_method": "add_bot_utterance_last_chance",
    "tags": ["last_chance"],
}
TIMEOUT = {
    "connector": {
        "protocol": "python",
        "class_name": "PredefinedTextConnector",
        "response_text": "Sorry, I need to think more on that.",
    },
    "state_manager_method": "add_bot_utterance_last_chance",
    "tags": ["timeout"],
}


def skill(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "connector": http(url),
        "dialog_formatter": f"{F}:eliza_like",
        "response_formatter": f"{F}:skill_pair",
        "state_manager_method": "add_hypothesis",
        **extra,
    }


def selector(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "connector": http(url),
        "dialog_formatter": f"{F}:full_dialog",
        "previous_services": ["skills"],
        "state_manager_method": "add_bot_utterance",
        **extra,
    }


def test_last_chance_answers_when_no_bot_utterance_is_made(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "last_chance_service": LAST_CHANCE,
                "skills": {"broken": skill(services(dream.failing()).url)},
                "response_selectors": {"rs": selector(services(dream.response_selector()).url)},
            }
        }
    )
    reply = say(client, "hello")
    assert reply["response"] == "Sorry, something went wrong inside."
    assert reply["active_skill"] == "last_chance_service"
    human = dialog_of(client, reply)["utterances"][0]
    failures = {e["service"]: e["kind"] for e in human["errors"]}
    # a failed service costs only its own output: the selector still ran, on nothing
    assert failures == {"skills.broken": "bad_status", "response_selectors.rs": "bad_status"}


def test_the_timeout_service_answers_when_the_deadline_passes(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "last_chance_service": LAST_CHANCE,
                "timeout_service": TIMEOUT,
                "skills": {
                    "slow": {
                        **skill(services(dream.sleepy(3.0)).url),
                        "dialog_formatter": f"{F}:last_utt",
                    }
                },
            }
        },
        dream_turn_timeout=0.5,
    )
    reply = say(client, "hello")
    assert reply["response"] == "Sorry, I need to think more on that."
    assert reply["active_skill"] == "timeout_service"
    human = dialog_of(client, reply)["utterances"][0]
    assert {e["service"]: e["kind"] for e in human["errors"]} == {"skills.slow": "timeout"}


def test_without_fallback_services_chorus_answers_its_fallback_text(
    services: Any, agent: AgentFactory
) -> None:
    client = agent({"services": {"skills": {"broken": skill(services(dream.failing()).url)}}})
    reply = say(client, "hello")
    assert reply["active_skill"] == "fallback_response"


@pytest.mark.parametrize("extra", [0, 2, 3])
def test_response_selector_answers_in_every_dream_shape(
    services: Any, agent: AgentFactory, extra: int
) -> None:
    client = agent(
        {
            "services": {
                "skills": {
                    "counter": {
                        "connector": http(services(dream.counter()).url),
                        "dialog_formatter": f"{F}:dff_like",
                        "response_formatter": f"{F}:skill_with_attributes",
                        "state_manager_method": "add_hypothesis",
                    }
                },
                "response_selectors": {
                    "rs": selector(services(dream.response_selector(extra)).url)
                },
            }
        }
    )
    reply = say(client, "hello")
    assert reply["response"] == "turn 0, 1 utterances, state 1"
    dialog = dialog_of(client, reply)
    # attributes travel only when the selector's answer carries them (5 or 6 items)
    expected = {"counter_state": {"turns": 1}} if extra else {}
    assert dialog["human"]["attributes"] == expected
    assert dialog["utterances"][1]["attributes"] == (
        {"chosen_by": "test selector"} if extra == 3 else {}
    )


def test_the_builtin_confidence_selector_and_an_http_skill(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "skills": {
                    "eliza": skill(services(dream.eliza()).url),
                    "counter": {
                        "connector": http(services(dream.counter()).url),
                        "dialog_formatter": f"{F}:dff_like",
                        "response_formatter": f"{F}:skill_with_attributes",
                        "state_manager_method": "add_hypothesis",
                    },
                },
                "response_selector": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "ConfidenceResponseSelectorConnector",
                    },
                    "previous_services": ["skills"],
                    "state_manager_method": "add_bot_utterance",
                },
            }
        }
    )
    reply = say(client, "hello")
    assert reply["active_skill"] == "counter"
    # the chosen hypothesis' attributes were merged as dp-agent's update_human does
    dialog = dialog_of(client, reply)
    assert dialog["human"]["attributes"] == {"counter_state": {"turns": 1}}
    assert dialog["bot"]["attributes"] == {"counter_turns": 1}


def test_true_counts_reach_formatters_past_the_window(
    services: Any, agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.kinds.DEFAULT_WINDOW", 4)
    log = Recorder()
    client = agent(
        {
            "services": {
                "skills": {
                    "counter": {
                        "connector": http(services(dream.counter(log)).url),
                        "dialog_formatter": f"{F}:dff_like",
                        "response_formatter": f"{F}:skill_with_attributes",
                        "state_manager_method": "add_hypothesis",
                    }
                },
                "rs": selector(services(dream.response_selector(2)).url),
            }
        },
    )
    for turn in range(6):
        reply = say(client, f"message {turn}")
        assert reply["response"].startswith(f"turn {turn}, {2 * turn + 1} utterances")
    # the formatter saw a window of at most 4 stored utterances and this turn's
    assert log.requests[-1]["window_batch"] == [
        [
            "message 3",
            "turn 3, 7 utterances, state 4",
            "message 4",
            "turn 4, 9 utterances, state 5",
            "message 5",
        ]
    ]


def test_a_python_connector_failure_costs_only_its_service(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "annotators": {
                    "broken": {
                        "connector": {
                            "protocol": "python",
                            "class_name": "tests.dream.connectors:Exploding",
                        },
                        "state_manager_method": "add_annotation",
                    }
                },
                "skills": {
                    "eliza": skill(services(dream.eliza()).url, previous_services=["annotators"])
                },
                "rs": selector(services(dream.response_selector()).url),
            }
        }
    )
    reply = say(client, "hello")
    assert reply["active_skill"] == "eliza"
    human = dialog_of(client, reply)["utterances"][0]
    assert human["errors"][0]["service"] == "annotators.broken"
    assert "out of order" in human["errors"][0]["message"]


def test_a_formatter_bug_is_logged_with_its_traceback_and_costs_only_its_service(
    services: Any, agent: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A formatter is the agent's own code: its exception is logged as a built-in's is (the
    same logger and line, with the traceback that finds the bug), the turn records its
    message for the service alone, and the turn still answers."""
    eliza = services(dream.eliza()).url
    client = agent(
        {
            "services": {
                "annotators": {
                    "asking": {
                        "connector": http(eliza),
                        "dialog_formatter": f"{F}:broken",
                        "state_manager_method": "add_annotation",
                    },
                    "answered": skill(eliza, response_formatter=f"{F}:broken"),
                },
                "skills": {"eliza": skill(eliza, previous_services=["annotators"])},
                "rs": selector(services(dream.response_selector()).url),
            }
        }
    )
    with caplog.at_level(logging.ERROR, logger="chorus.executor"):
        reply = say(client, "hello")
    assert reply["active_skill"] == "eliza"
    human = dialog_of(client, reply)["utterances"][0]
    raised = "raised KeyError: 'no such annotation'"
    assert sorted((e["service"], e["kind"], e["message"]) for e in human["errors"]) == [
        ("annotators.answered", "bad_response", f"response_formatter {raised}"),
        ("annotators.asking", "bad_response", f"dialog_formatter {raised}"),
    ]
    logged = sorted(
        (r.getMessage(), r.exc_info[0] if r.exc_info else None)
        for r in caplog.records
        if r.name == "chorus.executor" and r.levelno == logging.ERROR
    )
    assert logged == [
        ("service annotators.answered failed in the agent", KeyError),
        ("service annotators.asking failed in the agent", KeyError),
    ]
    assert 'raise KeyError("no such annotation")' in caplog.text  # the formatter's own line


def test_required_previous_services_skip_when_it_failed(services: Any, agent: AgentFactory) -> None:
    client = agent(
        {
            "services": {
                "last_chance_service": LAST_CHANCE,
                "annotators": {
                    "spelling": {
                        "connector": http(services(dream.failing()).url),
                        "dialog_formatter": f"{F}:last_utt",
                        "state_manager_method": "add_annotation",
                    }
                },
                "skills": {
                    "eliza": skill(
                        services(dream.eliza()).url, required_previous_services=["annotators"]
                    )
                },
                "rs": selector(services(dream.response_selector()).url),
            }
        }
    )
    reply = say(client, "hello")
    assert reply["active_skill"] == "last_chance_service"
    human = dialog_of(client, reply)["utterances"][0]
    kinds = {e["service"]: e["kind"] for e in human["errors"]}
    assert kinds == {"annotators.spelling": "bad_status", "skills.eliza": "skipped"}


def test_other_state_manager_methods(services: Any, agent: AgentFactory) -> None:
    """update_attributes, add_failure_bot_utterance, the overwriting last chance, an
    attribute that names an id (refused), and save_dialog."""
    client = agent(
        {
            "services": {
                "last_chance_service": {
                    **LAST_CHANCE,
                    "state_manager_method": "add_bot_utterance_last_chance_overwrite",
                },
                "attrs": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "PredefinedOutputConnector",
                        "output": {
                            "human_attributes": {"mood": "good", "location": "Paris"},
                            "bot_attributes": {"topic": "travel"},
                        },
                    },
                    "state_manager_method": "update_attributes",
                },
                "bad_attrs": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "PredefinedOutputConnector",
                        "output": {"human_attributes": {"id": "someone-else"}},
                    },
                    "state_manager_method": "update_attributes",
                },
                "failure": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "PredefinedOutputConnector",
                        "output": "I failed politely.",
                    },
                    "previous_services": ["attrs"],
                    "state_manager_method": "add_failure_bot_utterance",
                },
                "saver": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "PredefinedOutputConnector",
                        "output": None,
                    },
                    "previous_services": ["failure"],
                    "state_manager_method": "save_dialog",
                },
            }
        }
    )
    reply = say(client, "hello")
    assert reply["response"] == "I failed politely."
    assert reply["active_skill"] == "failure"
    dialog = dialog_of(client, reply)
    assert dialog["human"]["attributes"] == {"mood": "good"}
    assert dialog["bot"]["attributes"] == {"topic": "travel"}
    assert dialog["human"]["id"] != "someone-else"
    errors = dialog["utterances"][0]["errors"]
    assert [(e["service"], e["kind"]) for e in errors] == [("bad_attrs", "refused")]


def test_debug_output_and_a_numeric_user_id_as_dp_agent_clients_expect(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "annotators": {
                    "spelling": {
                        "connector": http(services(dream.spelling()).url),
                        "dialog_formatter": f"{F}:last_utt",
                        "state_manager_method": "add_annotation",
                    }
                },
                # After the annotators, as in Dream: else the response selector could
                # end the turn before the spelling annotator answers.
                "skills": {
                    "eliza": skill(services(dream.eliza()).url, previous_services=["annotators"])
                },
                "rs": selector(services(dream.response_selector()).url),
            }
        }
    )
    reply = say(client, "Hi pls", user=12345, debug_output=True)
    assert reply["user_id"] == 12345
    assert reply["debug_output"]["annotations"] == {"spelling": "hi please"}
    assert [h["skill_name"] for h in reply["debug_output"]["hypotheses"]] == ["eliza"]
    plain = say(client, "again", user="12345")
    assert plain["user_id"] == "12345"
    assert plain["dialog_id"] == reply["dialog_id"]  # the same user either way
    assert "debug_output" not in plain, "dp-agent leaves it out unless it is asked for"


def test_a_responder_ends_the_turn_without_waiting_for_the_rest(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "skills": {
                    "eliza": skill(services(dream.eliza()).url),
                    "slow": {
                        **skill(services(dream.sleepy(3.0)).url),
                        "dialog_formatter": f"{F}:last_utt",
                    },
                },
                "answer": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "ConfidenceResponseSelectorConnector",
                    },
                    "previous_services": ["skills.eliza"],
                    "state_manager_method": "add_bot_utterance",
                    "tags": ["responder"],
                },
            }
        },
        dream_turn_timeout=10,
    )
    reply = say(client, "hello")
    assert reply["active_skill"] == "eliza"
    human = dialog_of(client, reply)["utterances"][0]
    outcomes = {c["service"]: c["outcome"] for c in human["trace"]}
    assert outcomes == {"skills.eliza": "ok", "answer": "ok", "skills.slow": "skipped"}
    assert human["errors"] == []


def test_what_a_dream_service_sends_is_held_to_the_storage_bounds(
    services: Any, agent: AgentFactory
) -> None:
    """A dp-agent pipeline gets Chorus's trust boundary too: an annotation nested past
    MAX_JSON_DEPTH, or holding NaN, is refused and recorded; the turn answers."""
    from tests.api.test_trust_boundary import nested
    from tests.support.services import raw_app

    deep = services(raw_app(json_body=[nested(100)])).url
    nan = services(raw_app(body='[{"score": NaN}]')).url
    annotator = {"dialog_formatter": f"{F}:last_utt", "state_manager_method": "add_annotation"}
    client = agent(
        {
            "services": {
                "annotators": {
                    "deep": {"connector": http(deep), **annotator},
                    "nan": {"connector": http(nan), **annotator},
                },
                "skills": {
                    "eliza": skill(services(dream.eliza()).url, previous_services=["annotators"])
                },
                "response_selector": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "ConfidenceResponseSelectorConnector",
                    },
                    "previous_services": ["skills"],
                    "state_manager_method": "add_bot_utterance",
                },
            }
        }
    )
    reply = say(client, "hello")
    assert reply["active_skill"] == "eliza"
    human = dialog_of(client, reply)["utterances"][0]
    assert sorted((e["service"], e["kind"]) for e in human["errors"]) == [
        ("annotators.deep", "refused"),
        ("annotators.nan", "refused"),
    ]
    assert human["annotations"] == {}
    assert say(client, "again")["active_skill"] == "eliza"
