"""A dp-agent pipeline_conf.json through the agent over HTTP: Dream-shaped
services on 127.0.0.1, formatters and a python connector imported by dotted name."""

from __future__ import annotations

from typing import Any

import httpx

from agent.state.dp_agent import USER_PROFILE
from tests.conftest import SERVICE_TIMEOUT, AgentFactory
from tests.dream import services as dream
from tests.dream.services import Recorder

F = "tests.dream.formatters"


def http(url: str, **extra: Any) -> dict[str, Any]:
    return {"protocol": "http", "url": f"{url}/respond", **extra}


def say(client: httpx.Client, text: str, user: Any = "alice", **extra: Any) -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def dialog_of(client: httpx.Client, reply: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = client.get(
        f"/api/dialogs/{reply['dialog_id']}", params={"view": "chorus"}
    ).json()
    return body


def every_key_config(services: Any, spelling_log: Recorder) -> dict[str, Any]:
    """A Dream distribution's shape, using every key dp-agent reads."""
    lengths_url = services(dream.lengths()).url
    return {
        "connectors": {
            "spelling": http(services(dream.spelling(spelling_log)).url, timeout=SERVICE_TIMEOUT),
            "lengths": http(lengths_url, batch_size=4),
        },
        "services": {
            "last_chance_service": {
                "connector": {
                    "protocol": "python",
                    "class_name": "PredefinedTextConnector",
                    "response_text": "Sorry, something went wrong inside.",
                },
                "state_manager_method": "add_bot_utterance_last_chance",
                "tags": ["last_chance"],
                "is_enabled": True,
                "source": {"component": "components/last_chance.yml"},
            },
            "timeout_service": {
                "connector": {
                    "protocol": "python",
                    "class_name": "PredefinedTextConnector",
                    "response_text": "Sorry, I need to think more on that.",
                },
                "state_manager_method": "add_bot_utterance_last_chance",
                "tags": ["timeout"],
            },
            "annotators": {
                "spelling": {
                    "connector": "spelling",
                    "dialog_formatter": f"{F}:last_utt",
                    "response_formatter": f"{F}:simple",
                    "previous_services": [],
                    "tags": ["input"],
                    "state_manager_method": (
                        "add_annotation_and_reset_human_attributes_for_first_turn"
                    ),
                },
                "prev_bot_len": {
                    "connector": "lengths",
                    "dialog_formatter": f"{F}:previous_bot",
                    "response_formatter": f"{F}:simple",
                    "state_manager_method": "add_annotation_prev_bot_utt",
                },
                "switched_off": {
                    "connector": http("http://127.0.0.1:9/none"),
                    "state_manager_method": "add_annotation",
                    "is_enabled": False,
                },
            },
            "skill_selectors": {
                "rule_based_selector": {
                    "connector": http(services(dream.skill_selector("eliza", "counter")).url),
                    "dialog_formatter": f"{F}:full_dialog",
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["annotators"],
                    "tags": ["selector"],
                },
            },
            "skills": {
                "eliza": {
                    "connector": http(services(dream.eliza()).url),
                    "dialog_formatter": f"{F}:eliza_like",
                    "response_formatter": f"{F}:skill_pair",
                    "previous_services": ["skill_selectors"],
                    "state_manager_method": "add_hypothesis",
                },
                "counter": {
                    "connector": http(services(dream.counter()).url),
                    "dialog_formatter": {"name": f"{F}:dff_like", "skill": "counter"},
                    "response_formatter": f"{F}:skill_with_attributes",
                    "previous_services": ["rule_based_selector"],
                    "required_previous_services": ["annotators.spelling"],
                    "state_manager_method": "add_hypothesis",
                },
                "not_chosen": {
                    "connector": http(services(dream.eliza()).url),
                    "dialog_formatter": f"{F}:eliza_like",
                    "response_formatter": f"{F}:skill_pair",
                    "previous_services": ["skill_selectors.rule_based_selector"],
                    "state_manager_method": "add_hypothesis",
                },
            },
            "candidate_annotators": {
                "hyp_len": {
                    "connector": {"protocol": "http", "url": f"{lengths_url}/respond"},
                    "dialog_formatter": f"{F}:one_task_per_hypothesis",
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["skills"],
                    "state_manager_method": "add_hypothesis_annotation",
                },
                "hyp_len_batch": {
                    "connector": http(services(dream.lengths(batch_key=True)).url),
                    "dialog_formatter": f"{F}:hypotheses_list",
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["skills"],
                    "state_manager_method": "add_hypothesis_annotation_batch",
                },
            },
            "response_selectors": {
                "response_selector": {
                    "connector": http(services(dream.response_selector(extra=3)).url),
                    "dialog_formatter": f"{F}:full_dialog",
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["candidate_annotators"],
                    "state_manager_method": "add_bot_utterance",
                },
            },
            "response_annotator_selectors": {
                "connector": {
                    "protocol": "python",
                    "class_name": "tests.dream.connectors:AnnotatorChooser",
                    "annotator_names": ["bot_len", "shout"],
                },
                "previous_services": ["response_selectors"],
                "tags": ["selector"],
            },
            "response_annotators": {
                "bot_len": {
                    "connector": "lengths",
                    "dialog_formatter": f"{F}:last_bot",
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["response_annotator_selectors"],
                    "state_manager_method": "add_annotation",
                },
                "untouched": {
                    "connector": "lengths",
                    "dialog_formatter": f"{F}:last_bot",
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["response_annotator_selectors"],
                    "state_manager_method": "add_annotation",
                },
            },
            "post": {
                "shout": {
                    "connector": http(services(dream.shouting()).url),
                    "dialog_formatter": {"name": f"{F}:prefixed", "prefix": "re: "},
                    "response_formatter": f"{F}:simple",
                    "previous_services": ["response_annotators.bot_len"],
                    "state_manager_method": "add_text",
                },
                "saver": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "PredefinedOutputConnector",
                        "output": {},
                    },
                    "previous_services": ["post.shout"],
                    "state_manager_method": "save_dialog",
                    "tags": ["responder"],
                },
            },
        },
        "metadata": {"display_name": "Every key", "author": "tests"},
    }


def test_a_dream_config_using_every_key_runs_unchanged(services: Any, agent: AgentFactory) -> None:
    spelling_log = Recorder()
    client = agent(every_key_config(services, spelling_log))

    first = say(client, "Hello pls")
    # counter (0.9) beats eliza (0.6); shout rewrote the bot's text after the selector.
    assert first["active_skill"] == "counter"
    assert first["response"] == "RE: HELLO PLS"
    assert spelling_log.requests == [{"sentences": ["Hello pls"]}]

    dialog = dialog_of(client, first)
    human, bot = dialog["utterances"]
    assert human["annotations"]["spelling"] == "hello please"
    skills = [h["skill_name"] for h in human["hypotheses"]]
    assert sorted(skills) == ["counter", "eliza"]  # not_chosen was not selected
    by_skill = {h["skill_name"]: h for h in human["hypotheses"]}
    eliza_text = "Why do you say 'hello please'? (1 said)"
    assert by_skill["eliza"]["text"] == eliza_text
    assert by_skill["eliza"]["annotations"] == {
        "hyp_len": {"length": len(eliza_text)},
        "hyp_len_batch": {"length": len(eliza_text)},
    }
    assert by_skill["counter"]["can_continue"] == "yes"  # a skill's own field is kept
    assert by_skill["counter"]["text"] == "turn 0, 1 utterances, state 1"
    assert bot["orig_text"] == "turn 0, 1 utterances, state 1"
    assert bot["text"] == "RE: HELLO PLS"
    assert bot["active_skill"] == "counter"
    assert bot["attributes"] == {"chosen_by": "test selector"}
    # the python selector named bot_len and shout only; "untouched" was skipped
    assert bot["annotations"] == {"bot_len": {"length": len("turn 0, 1 utterances, state 1")}}
    assert "untouched" not in bot["annotations"]
    # update_human: "name" is a profile field, the rest goes to attributes
    assert dialog["human"]["attributes"]["counter_state"] == {"turns": 1}
    assert dialog["human"]["profile"]["name"] == "Alice"
    assert "name" not in dialog["human"]["attributes"]
    assert dialog["bot"]["attributes"] == {"counter_turns": 1}
    traced = {c["service"]: c["outcome"] for c in human["trace"]}
    assert traced["skills.not_chosen"] == "skipped"
    assert traced["response_annotators.untouched"] == "skipped"
    assert "annotators.switched_off" not in traced
    # role: the group when it is a role's name, else what the tags say, else "services";
    # dream_group: the file's group, a name only.
    roles = {c["service"]: (c["role"], c["dream_group"]) for c in human["trace"]}
    assert {name: roles[name] for name in roles if name != "last_chance_service"} == {
        "annotators.spelling": ("annotators", "annotators"),
        "annotators.prev_bot_len": ("annotators", "annotators"),
        "skill_selectors.rule_based_selector": ("skill_selectors", "skill_selectors"),
        "skills.counter": ("skills", "skills"),
        "skills.eliza": ("skills", "skills"),
        "skills.not_chosen": ("skills", "skills"),
        "candidate_annotators.hyp_len": ("candidate_annotators", "candidate_annotators"),
        "candidate_annotators.hyp_len_batch": ("candidate_annotators", "candidate_annotators"),
        "response_selectors.response_selector": ("response_selectors", "response_selectors"),
        "response_annotator_selectors": ("skill_selectors", None),
        "response_annotators.bot_len": ("response_annotators", "response_annotators"),
        "response_annotators.untouched": ("response_annotators", "response_annotators"),
        "post.shout": ("services", "post"),
        "post.saver": ("response_selectors", "post"),
    }
    assert human["errors"] == []
    # the /pipeline page's data: stages by dependency depth, the fallbacks last
    info = client.get("/api/pipeline").json()
    assert [s["role"] for s in info["stages"]][:3] == ["annotators", "skill_selectors", "skills"]
    fallbacks = info["stages"][-1]
    assert (fallbacks["role"], fallbacks["services"]) == (
        "fallbacks",
        ["last_chance_service", "timeout_service"],
    )
    by_name = {s["name"]: s for s in info["services"]}
    assert by_name["skills.counter"]["required_previous_services"] == ["annotators.spelling"]
    placed = {name: (s["role"], s["dream_group"]) for name, s in by_name.items()}
    assert placed["post.shout"] == ("services", "post")
    assert placed["post.saver"] == ("response_selectors", "post")
    assert placed["last_chance_service"] == ("fallbacks", None)
    assert by_name["response_annotator_selectors"]["target"] == (
        "python:tests.dream.connectors:AnnotatorChooser"
    )
    assert info["stats"]["skills.counter"]["calls"] == 1
    assert info["disabled"] == [
        {
            "name": "annotators.switched_off",
            "role": "annotators",
            "dream_group": "annotators",
            "reason": "is_enabled: false",
        }
    ]
    # dp-agent's dialect: attributes.pipeline lists the file's services in its order (the
    # disabled one too, as dp-agent reads no is_enabled) and dp-agent's input and
    # responder; the profile has dp-agent's keys, not Chorus's unset timezone
    view = client.get(f"/api/dialogs/{first['dialog_id']}").json()
    assert view["attributes"]["pipeline"] == [
        "annotators.spelling",
        "annotators.prev_bot_len",
        "annotators.switched_off",
        "skill_selectors.rule_based_selector",
        "skills.eliza",
        "skills.counter",
        "skills.not_chosen",
        "candidate_annotators.hyp_len",
        "candidate_annotators.hyp_len_batch",
        "response_selectors.response_selector",
        "response_annotator_selectors",
        "response_annotators.bot_len",
        "response_annotators.untouched",
        "post.shout",
        "post.saver",
        "input",
        "responder",
    ]
    assert set(view["human"]["profile"]) == set(USER_PROFILE)
    assert view["human"]["profile"]["name"] == "Alice"

    second = say(client, "And again")
    assert second["response"] == "RE: AND AGAIN"
    dialog = dialog_of(client, second)
    human2 = dialog["utterances"][2]
    # the counter's state came back through the human attributes; the dff index counts
    assert by_text(human2, "counter").startswith("turn 1, 3 utterances, state 2")
    # add_annotation_prev_bot_utt: shown on the previous bot utterance
    assert human2["attributes"]["_prev_bot_annotations"] == {
        "prev_bot_len": {"length": len("RE: HELLO PLS")}
    }

    # A new dialog: its first annotation resets the user's attributes (dp-agent's
    # add_annotation_and_reset_human_attributes_for_first_turn), so the counter starts over.
    say(client, "/close")
    third = say(client, "Hi again")
    assert third["dialog_id"] != first["dialog_id"]
    dialog = dialog_of(client, third)
    assert by_text(dialog["utterances"][0], "counter") == "turn 0, 1 utterances, state 1"
    assert dialog["human"]["attributes"] == {"disliked_skills": [], "counter_state": {"turns": 1}}
    assert dialog["human"]["profile"]["name"] == "Alice"  # the profile is kept


def by_text(utterance: dict[str, Any], skill: str) -> str:
    texts: list[str] = [h["text"] for h in utterance["hypotheses"] if h["skill_name"] == skill]
    return texts[0]
