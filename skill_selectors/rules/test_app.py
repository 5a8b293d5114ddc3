"""The rule-based skill selector over real HTTP: each rule, and every skill when unsure.

The engine is tested on the rules of this file (:data:`TEST_RULES`), not on the shipped
``rules.json``: that file is the deployment's to change (add a skill, route an intent to
it) without breaking these tests. The shipped file is only checked to load and to name
skills of the pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.sdk.testing import ServiceClient, view
from skill_selectors.rules.app import RULES_FILE, Rules, RulesError, build_service, load_rules

EVERY_SKILL: list[str] = []
ROOT = Path(__file__).resolve().parents[2]
TEST_RULES: dict[str, Any] = {
    "always": ["fallback"],
    "on_toxic": ["fallback"],
    "intents": {
        "greeting": ["greeting", "smalltalk"],
        "tell_name": ["greeting"],
        "thanks": ["smalltalk"],
        "bot_identity": ["faq", "smalltalk", "llm"],
        "abilities": ["faq", "llm"],
    },
    "min_intent_confidence": 0.7,
}
NAMED = ["fallback", "greeting", "smalltalk", "faq", "llm"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceClient]:
    path = tmp_path_factory.mktemp("rules") / "rules.json"
    path.write_text(json.dumps(TEST_RULES))
    with ServiceClient(build_service(load_rules(path)).app) as client:
        yield client


def annotated(
    text: str, annotations: dict[str, Any], dialog_id: str = "d1", **attributes: Any
) -> dict[str, Any]:
    """A one-utterance dialog whose human utterance carries these annotations."""
    dialog = view(text, human_attributes=attributes, dialog_id=dialog_id)
    dialog["utterances"][-1]["annotations"] = annotations
    return dialog


def said(
    text: str,
    *,
    intent: str | None = None,
    toxic: bool | None = None,
    dialog_id: str = "d1",
    **attributes: Any,
) -> dict[str, Any]:
    """As the intents and badwords annotators would annotate it (``None``: that one failed)."""
    annotations: dict[str, Any] = {}
    if intent is not None:
        annotations["intents"] = {"intent": intent, "confidence": 0.9, "method": "pattern"}
    if toxic is not None:
        annotations["badwords"] = {"toxic": toxic, "words": ["idiot"] if toxic else []}
    return annotated(text, annotations, dialog_id, **attributes)


def decisions(client: ServiceClient, *dialogs: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/respond", json={"dialogs": list(dialogs)})
    assert response.status_code == 200, response.text
    answer: list[dict[str, Any]] = response.json()
    return answer


def select(client: ServiceClient, *dialogs: dict[str, Any]) -> list[list[str]]:
    return [decision["skills"] for decision in decisions(client, *dialogs)]


def test_a_confident_intent_runs_its_skills_and_the_always_ones(client: ServiceClient) -> None:
    assert select(client, said("hello", intent="greeting", toxic=False)) == [
        ["greeting", "smalltalk", "fallback"]
    ]
    assert select(client, said("who are you?", intent="bot_identity")) == [
        ["faq", "smalltalk", "llm", "fallback"]
    ]


def test_a_toxic_utterance_runs_only_the_toxic_skills(client: ServiceClient) -> None:
    assert select(client, said("hello, idiot", intent="greeting", toxic=True)) == [["fallback"]]


def test_a_toxic_answer_to_the_name_question_does_not_reach_the_greeting(
    client: ServiceClient,
) -> None:
    dialog = said("idiot", toxic=True, greeting_stage="asked_name")
    assert select(client, dialog) == [["fallback"]]


@pytest.mark.parametrize(
    "annotations",
    [
        {"intents": {"intent": "greeting", "confidence": 0.3, "method": "similarity"}},
        {"intents": {"intent": "yes", "confidence": 1.0, "method": "pattern"}},
        {
            "intents": {"intent": None, "confidence": 0.0, "method": None},
            "badwords": {"toxic": False, "words": []},
        },
    ],
    ids=["unsure intent", "intent without a rule", "no intent"],
)
def test_every_skill_runs_when_the_rules_have_nothing_sure_to_say(
    client: ServiceClient, annotations: dict[str, Any]
) -> None:
    assert select(client, annotated("hmm", annotations)) == [EVERY_SKILL]


@pytest.mark.parametrize(
    "annotations",
    [
        {},
        {"intents": None, "badwords": None},
        {"intents": "greeting", "badwords": {"words": []}},
    ],
    ids=["missing", "null", "malformed"],
)
def test_failed_annotators_mean_every_skill_not_an_error(
    client: ServiceClient, annotations: dict[str, Any]
) -> None:
    assert select(client, annotated("hello", annotations)) == [EVERY_SKILL]


def test_the_greeting_stays_reachable_while_it_waits_for_a_name(client: ServiceClient) -> None:
    waiting = "asked_name"
    assert select(
        client,
        said("thanks", intent="thanks", greeting_stage=waiting),
        said("my name is Ann", intent="tell_name", dialog_id="d2", greeting_stage=waiting),
        said("Ann", dialog_id="d3", greeting_stage=waiting),
        said("thanks", intent="thanks", dialog_id="d4", greeting_stage="done"),
    ) == [
        ["smalltalk", "fallback", "greeting"],
        ["greeting", "fallback"],
        EVERY_SKILL,
        ["smalltalk", "fallback"],
    ]


def test_a_batch_is_answered_per_dialog_in_order(client: ServiceClient) -> None:
    assert select(
        client,
        said("what can you do?", intent="abilities", dialog_id="a"),
        said("you idiot", toxic=True, dialog_id="b"),
        said("trains", dialog_id="c"),
    ) == [["faq", "llm", "fallback"], ["fallback"], EVERY_SKILL]


def test_health(client: ServiceClient) -> None:
    assert client.get("/health").json() == {
        "status": "ok",
        "service": "rules",
        "role": "skill_selector",
    }


def test_a_malformed_body_is_refused_naming_the_field(client: ServiceClient) -> None:
    response = client.post("/respond", json={"dialogs": [{"dialog_id": "d1"}]})
    assert response.status_code == 422
    assert "utterances" in response.text


def test_each_decision_says_why(client: ServiceClient) -> None:
    thanks, toxic, unsure, unknown, waiting = decisions(
        client,
        said("thanks", intent="thanks"),
        said("you idiot", toxic=True),
        annotated("hmm", {"intents": {"intent": "greeting", "confidence": 0.3}}),
        said("yes", intent="yes"),
        said("Ann", intent="thanks", greeting_stage="asked_name"),
    )
    assert thanks["reason"] == "intent thanks (0.90) → smalltalk, fallback"
    assert toxic["reason"] == "toxic utterance → only fallback"
    assert unsure["reason"] == "intent greeting (0.30) is below 0.70: every skill runs"
    assert unknown["reason"] == "no rule for intent yes: every skill runs"
    assert waiting["reason"].endswith("greeting: it is waiting for the user's name")


def test_an_intent_the_utterance_also_has_brings_its_skills(client: ServiceClient) -> None:
    """ "Hi, thanks!" is thanks to the annotator and a greeting too (``also``): the
    greeting's skills run beside small talk's; an intent without a rule adds nothing."""
    both = {"intents": {"intent": "thanks", "confidence": 1.0, "also": ["greeting", "yes"]}}
    (decision,) = decisions(client, annotated("Hi, thanks!", both))
    assert decision["skills"] == ["smalltalk", "greeting", "fallback"]
    assert decision["reason"] == ("intent thanks + greeting (1.00) → smalltalk, greeting, fallback")


def test_the_rules_decide_only_about_the_skills_they_name(client: ServiceClient) -> None:
    thanks, toxic = decisions(
        client, said("thanks", intent="thanks"), said("you idiot", toxic=True)
    )
    # A skill no rule names ("weather", just added) runs whatever the rules chose...
    assert thanks["decides"] == NAMED
    # ...except for a toxic utterance, which reaches only the on_toxic skills.
    assert toxic["decides"] is None


SHIPPED = json.loads(RULES_FILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"on_toxc": ["fallback"]}, "on_toxc: Extra inputs are not permitted"),
        ({"on_toxic": []}, "on_toxic: List should have at least 1 item"),
        ({"intents": {"thanks": []}}, "intents.thanks: List should have"),
        ({"intents": {"thanks": "smalltalk"}}, "intents.thanks: Input should be a valid array"),
        ({"min_intent_confidence": 1.5}, "min_intent_confidence: Input should be less than"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_key(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({**SHIPPED, **change}))
    with pytest.raises(RulesError, match=named) as refused:
        load_rules(path)
    assert str(refused.value).startswith(str(path))


def test_the_shipped_rules_load_and_name_only_skills_of_the_pipeline() -> None:
    rules: Rules = load_rules(RULES_FILE)
    pipeline = json.loads((ROOT / "pipeline.json").read_text(encoding="utf-8"))
    unknown = set(rules.named()) - set(pipeline["services"]["skills"])
    assert not unknown, f"rules.json names skills that pipeline.json has not: {unknown}"
