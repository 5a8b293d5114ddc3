"""The rule-based skill selector over real HTTP: each rule, and every skill when unsure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from skill_selectors.rules.app import RulesError, app, load_rules
from tests.support.servers import serving
from tests.support.views import view

EVERY_SKILL: list[str] = []


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(app) as server:
        yield server.url


def annotated(text: str, annotations: dict[str, Any], dialog_id: str = "d1",
              **attributes: Any) -> dict[str, Any]:
    """A one-utterance dialog whose human utterance carries these annotations."""
    dialog = view(text, human_attributes=attributes, dialog_id=dialog_id)
    dialog["utterances"][-1]["annotations"] = annotations
    return dialog


def said(text: str, *, intent: str | None = None, toxic: bool | None = None,
         dialog_id: str = "d1", **attributes: Any) -> dict[str, Any]:
    """As the intents and badwords annotators would annotate it (``None``: that one failed)."""
    annotations: dict[str, Any] = {}
    if intent is not None:
        annotations["intents"] = {"intent": intent, "confidence": 0.9, "method": "pattern"}
    if toxic is not None:
        annotations["badwords"] = {"toxic": toxic, "words": ["idiot"] if toxic else []}
    return annotated(text, annotations, dialog_id, **attributes)


def select(url: str, *dialogs: dict[str, Any]) -> list[list[str]]:
    response = httpx.post(f"{url}/respond", json={"dialogs": list(dialogs)})
    assert response.status_code == 200, response.text
    answer: list[list[str]] = response.json()
    return answer


def test_a_confident_intent_runs_its_skills_and_the_always_ones(url: str) -> None:
    assert select(url, said("hello", intent="greeting", toxic=False)) == [
        ["greeting", "smalltalk", "fallback"]]
    assert select(url, said("who are you?", intent="bot_identity")) == [
        ["faq", "smalltalk", "llm", "fallback"]]


def test_a_toxic_utterance_runs_only_the_toxic_skills(url: str) -> None:
    assert select(url, said("hello, idiot", intent="greeting", toxic=True)) == [["fallback"]]


def test_a_toxic_answer_to_the_name_question_does_not_reach_the_greeting(url: str) -> None:
    dialog = said("idiot", toxic=True, greeting_stage="asked_name")
    assert select(url, dialog) == [["fallback"]]


@pytest.mark.parametrize("annotations", [
    {"intents": {"intent": "greeting", "confidence": 0.3, "method": "similarity"}},
    {"intents": {"intent": "yes", "confidence": 1.0, "method": "pattern"}},
    {"intents": {"intent": None, "confidence": 0.0, "method": None},
     "badwords": {"toxic": False, "words": []}},
], ids=["unsure intent", "intent without a rule", "no intent"])
def test_every_skill_runs_when_the_rules_have_nothing_sure_to_say(
    url: str, annotations: dict[str, Any]
) -> None:
    assert select(url, annotated("hmm", annotations)) == [EVERY_SKILL]


@pytest.mark.parametrize("annotations", [
    {},
    {"intents": None, "badwords": None},
    {"intents": "greeting", "badwords": {"words": []}},
], ids=["missing", "null", "malformed"])
def test_failed_annotators_mean_every_skill_not_an_error(
    url: str, annotations: dict[str, Any]
) -> None:
    assert select(url, annotated("hello", annotations)) == [EVERY_SKILL]


def test_the_greeting_stays_reachable_while_it_waits_for_a_name(url: str) -> None:
    waiting = "asked_name"
    assert select(
        url,
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


def test_a_batch_is_answered_per_dialog_in_order(url: str) -> None:
    assert select(
        url,
        said("what can you do?", intent="abilities", dialog_id="a"),
        said("you idiot", toxic=True, dialog_id="b"),
        said("trains", dialog_id="c"),
    ) == [["faq", "llm", "fallback"], ["fallback"], EVERY_SKILL]


def test_health(url: str) -> None:
    assert httpx.get(f"{url}/health").json() == {
        "status": "ok", "service": "rules", "role": "skill_selector"}


def test_a_malformed_body_is_refused_naming_the_field(url: str) -> None:
    response = httpx.post(f"{url}/respond", json={"dialogs": [{"dialog_id": "d1"}]})
    assert response.status_code == 422
    assert "utterances" in response.text


SHIPPED = json.loads((Path(__file__).parent / "rules.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("change", "named"), [
    ({"on_toxc": ["fallback"]}, "on_toxc: Extra inputs are not permitted"),
    ({"on_toxic": []}, "on_toxic: List should have at least 1 item"),
    ({"intents": {**SHIPPED["intents"], "thanks": []}}, "intents.thanks: List should have"),
    ({"intents": {"thanks": "smalltalk"}}, "intents.thanks: Input should be a valid array"),
    ({"min_intent_confidence": 1.5}, "min_intent_confidence: Input should be less than"),
])
def test_a_bad_rules_file_is_refused_naming_the_key(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({**SHIPPED, **change}))
    with pytest.raises(RulesError, match=named) as refused:
        load_rules(path)
    assert str(refused.value).startswith(str(path))


def test_the_shipped_rules_load() -> None:
    rules = load_rules(Path(__file__).parent / "rules.json")
    assert rules.on_toxic == ["fallback"]
    assert rules.min_intent_confidence == 0.7
