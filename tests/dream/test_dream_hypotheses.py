"""Hypotheses reach formatters and dp-agent's tools as the skills returned them, a dp-agent
skill selector's decision is recorded, and what Chorus keeps for a dp-agent pipeline is shown
in the dp-agent view where dp-agent keeps it; through the agent over HTTP."""

from __future__ import annotations

from typing import Any

from tests.conftest import AgentFactory
from tests.dream import services as dream
from tests.dream.services import Recorder
from tests.dream.test_dream_pipeline import F, http, say


def config(services: Any, seen: Recorder) -> dict[str, Any]:
    def skill(app: Any, formatter: str, after: str) -> dict[str, Any]:
        return {
            "connector": http(services(app).url),
            "dialog_formatter": f"{F}:eliza_like",
            "response_formatter": f"{F}:{formatter}",
            "previous_services": [after],
            "state_manager_method": "add_hypothesis",
        }

    return {
        "services": {
            "annotators": {
                "prev_bot_len": {
                    "connector": http(services(dream.lengths()).url),
                    "dialog_formatter": f"{F}:previous_bot",
                    "response_formatter": f"{F}:simple",
                    "state_manager_method": "add_annotation_prev_bot_utt",
                },
            },
            "skill_selectors": {
                "rule_based_selector": {
                    "connector": http(services(dream.skill_selector("eliza", "counter")).url),
                    "dialog_formatter": f"{F}:full_dialog",
                    "response_formatter": f"{F}:simple",
                    "tags": ["selector"],
                    # as in Dream's configs: the turn waits for the annotators (without
                    # this the annotator races the turn's end, and its output may be lost)
                    "previous_services": ["annotators"],
                },
            },
            "skills": {
                "eliza": skill(dream.eliza(), "skill_pair", "skill_selectors"),
                "counter": {
                    **skill(dream.counter(), "skill_with_attributes", "skill_selectors"),
                    "dialog_formatter": {"name": f"{F}:dff_like", "skill": "counter"},
                },
                "not_chosen": skill(dream.eliza(), "skill_pair", "skill_selectors"),
            },
            "response_selectors": {
                "response_selector": {
                    "connector": http(services(dream.response_selector(recorder=seen)).url),
                    "dialog_formatter": f"{F}:full_dialog",
                    "previous_services": ["skills"],
                    "state_manager_method": "add_bot_utterance",
                },
            },
        }
    }


def test_hypotheses_are_shown_and_stored_as_the_skills_returned_them(
    services: Any, agent: AgentFactory
) -> None:
    seen = Recorder()
    client = agent(config(services, seen))
    first = say(client, "hello")
    say(client, "again")

    # eliza's formatter made no attributes: none are added; counter's stay inside its own
    eliza: dict[str, Any] = {
        "skill_name": "eliza",
        "text": "Why do you say 'hello'? (1 said)",
        "confidence": 0.6,
        "annotations": {},
    }
    counter = {
        "skill_name": "counter",
        "text": "turn 0, 1 utterances, state 1",
        "confidence": 0.9,
        "annotations": {},
        "human_attributes": {"counter_state": {"turns": 1}, "name": "Alice"},
        "bot_attributes": {"counter_turns": 1},
        "can_continue": "yes",
    }
    by_skill = {
        h["skill_name"]: h
        for h in seen.requests[0]["dialogs"][0]["human_utterances"][-1]["hypotheses"]
    }
    assert by_skill == {"eliza": eliza, "counter": counter}
    # the next turn's formatter reads the first turn's hypotheses back from the store unchanged
    history = seen.requests[1]["dialogs"][0]["human_utterances"][0]["hypotheses"]
    assert {h["skill_name"]: h for h in history} == by_skill

    dp_view = client.get(f"/api/dialogs/{first['dialog_id']}", params={"view": "dp-agent"})
    stored = dp_view.json()["human_utterances"][0]["hypotheses"]
    assert {h["skill_name"]: h for h in stored} == by_skill


def test_a_dp_agent_skill_selectors_decision_is_recorded(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(config(services, Recorder()))
    reply = say(client, "hello")
    url = f"/api/dialogs/{reply['dialog_id']}"
    human = client.get(url, params={"view": "chorus"}).json()["utterances"][0]
    assert human["skill_selection"] == [
        {
            "selector": "skill_selectors.rule_based_selector",
            "skills": ["counter", "eliza"],
            "reason": None,
            "decides": ["counter", "eliza", "not_chosen"],
        }
    ]
    assert {h["skill_name"] for h in human["hypotheses"]} == {"counter", "eliza"}


def test_the_dp_agent_dialect_shows_previous_bot_annotations_where_dp_agent_keeps_them(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(config(services, Recorder()))
    first = say(client, "hello")
    say(client, "again")
    url = f"/api/dialogs/{first['dialog_id']}"
    dialog = client.get(url, params={"view": "dp-agent"}).json()
    bot = dialog["bot_utterances"][0]
    # annotated on the second turn, shown on the first turn's bot utterance, as dp-agent has it
    assert bot["annotations"] == {"prev_bot_len": {"length": len(bot["text"])}}
    for human in dialog["human_utterances"]:
        assert human["attributes"] == {}, "Chorus's bookkeeping stays out of dp-agent's dialect"
    # Chorus's own dialect keeps where it is stored
    chorus = client.get(url, params={"view": "chorus"}).json()["utterances"]
    assert chorus[1]["annotations"] == {}
    assert chorus[2]["attributes"]["_prev_bot_annotations"] == bot["annotations"]
