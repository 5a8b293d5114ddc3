"""The store's trust boundary, tried as an attacker would, through the agent over HTTP.

Hostile skills and annotators (real little servers) and hostile clients, on both stores:
nothing they send reaches a query as code, nothing they send can make a dialog unreadable,
and what cannot be stored is refused with a message that says why, costing only the
sender's own output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agent.sdk import DialogView, Service, SkillHypothesis
from agent.state.storage_limits import StorageLimits
from tests.conftest import AgentFactory, service_entry
from tests.support.servers import ServerThread
from tests.support.services import fixed_skill, raw_app

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

Services = Callable[[FastAPI], ServerThread]

#: Keys an attacker would try on an SQL or MongoDB store: quotes, comments, SQL functions,
#: JSON path syntax, escapes of the MongoDB codec, whitespace, non-Latin text.
HOSTILE_KEYS = [
    "it's",
    "x'); DROP TABLE users; --",
    "a', '$', 'pwned",
    "' || char(39) || '",
    "--",
    "/*",
    "]",
    "[0]",
    "[#]",
    "\\",
    "\\'",
    "a$b",
    "%24x",
    "%2E",
    "50%",
    " ",
    " padded ",
    "ключ",
    "🔑 key",
    "a\tb",
    "\u2003",
    "{}",
    "'); SELECT json_set(doc, '$', 1); --",
]
#: Keys that would address something other than themselves in a path: refused.
REFUSED_KEYS = ["a.b", "$set", 'say "hi"', ""]


#: A turn's end is written differently on MongoDB 8 (one bulkWrite): these run there too.
ALL_STORES = pytest.mark.parametrize("db_url", ["sqlite", "mongodb", "mongodb-8"], indirect=True)


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"deeper": value}
    return value


def user_dialog(client: httpx.Client, user: str) -> dict[str, Any]:
    response = client.get(f"/api/user/{user}")
    assert response.status_code == 200, response.text
    dialogs: list[dict[str, Any]] = response.json()
    return dialogs[-1]


def attacker_skill(attack: dict[str, Any]) -> FastAPI:
    """Answers "attack" with a hypothesis carrying ``attack``'s fields, as raw JSON (no SDK
    checks on this side: the agent is what must hold); anything else with a plain answer."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> JSONResponse:
        answers = []
        for dialog in (await request.json())["dialogs"]:
            if dialog["utterances"][-1]["text"] == "attack":
                answers.append([{"text": "done", "confidence": 0.9, **attack}])
            else:
                answers.append([{"text": "plain", "confidence": 0.9}])
        return JSONResponse(answers)

    return app


def errors_of(utterance: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["service"], e["kind"]) for e in utterance["errors"]]


# -- 1. injection through attribute keys ---------------------------------------------------


def test_hostile_attribute_keys_are_stored_as_plain_keys(
    services: Services,
    agent: AgentFactory,
) -> None:
    attributes = {key: index for index, key in enumerate(HOSTILE_KEYS)}
    skill = services(attacker_skill({"human_attributes": attributes, "bot_attributes": attributes}))
    client = agent({"services": {"skills": {"hostile": service_entry(skill.url)}}})
    assert client.post("/", json={"user_id": "victim", "payload": "hi"}).status_code == 200
    victim_before = user_dialog(client, "victim")["human"]

    answer = client.post("/", json={"user_id": "mallory", "payload": "attack"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["response"] == "done"
    dialog = user_dialog(client, "mallory")
    assert dialog["human"]["attributes"] == attributes
    assert dialog["bot"]["attributes"] == attributes
    assert dialog["human"]["profile"]["name"] is None
    # no other user's profile or attributes moved, and both dialogs go on
    assert user_dialog(client, "victim")["human"] == victim_before
    for user in ("victim", "mallory"):
        again = client.post("/", json={"user_id": user, "payload": "hello"})
        assert again.status_code == 200 and again.json()["response"] == "plain"


def test_a_client_cannot_inject_through_its_extra_fields(
    agent: AgentFactory, services: Services
) -> None:
    skill = services(fixed_skill("echo", "ok", 0.5))
    client = agent({"services": {"skills": {"echo": service_entry(skill.url)}}})
    extra = {key: key for key in HOSTILE_KEYS if key.strip() and not key.startswith("$")}
    answer = client.post("/", json={"user_id": "mallory", "payload": "hi", **extra})
    assert answer.status_code == 200, answer.text
    human = user_dialog(client, "mallory")["utterances"][0]
    assert human["attributes"] == extra


def test_keys_that_would_be_paths_are_refused(services: Services, agent: AgentFactory) -> None:
    skills = {
        f"s{i}": service_entry(services(attacker_skill({"human_attributes": {key: 1}})).url)
        for i, key in enumerate(REFUSED_KEYS)
    }
    client = agent({"services": {"skills": skills}})
    answer = client.post("/", json={"user_id": "mallory", "payload": "attack"})
    assert answer.status_code == 200 and answer.json()["active_skill"] == "fallback_response"
    dialog = user_dialog(client, "mallory")
    assert sorted(errors_of(dialog["utterances"][0])) == [
        (name, "bad_response") for name in sorted(skills)
    ]
    assert dialog["human"]["attributes"] == {}


# -- 2. values that could not be read back --------------------------------------------------


def test_a_deeply_nested_extra_field_is_refused_and_the_dialog_goes_on(
    services: Services,
    agent: AgentFactory,
) -> None:
    skill = services(fixed_skill("echo", "ok", 0.5))
    client = agent({"services": {"skills": {"echo": service_entry(skill.url)}}})
    assert client.post("/", json={"user_id": "ann", "payload": "hi"}).status_code == 200
    for depth in (40, 300):
        refused = client.post("/", json={"user_id": "ann", "payload": "x", "deep": nested(depth)})
        assert refused.status_code == 422, refused.text
        assert "MAX_JSON_DEPTH" in refused.text and "deep" in refused.text
    later = client.post("/", json={"user_id": "ann", "payload": "still here?"})
    assert later.status_code == 200 and later.json()["response"] == "ok"
    assert [u["text"] for u in user_dialog(client, "ann")["utterances"]] == [
        "hi",
        "ok",
        "still here?",
        "ok",
    ]


def test_unstorable_service_outputs_are_refused_and_recorded(
    services: Services,
    agent: AgentFactory,
) -> None:
    """Each hostile output costs only its own service's part of the turn."""
    deep_annotator = services(raw_app(json_body=[nested(300)]))
    nan_annotator = services(raw_app(body='[{"score": NaN}]'))
    huge_number = services(raw_app(body='[{"score": 1e400}]'))
    surrogate = services(raw_app(body='[{"label": "\\ud800"}]'))
    many_keys = services(attacker_skill({"human_attributes": {f"k{i}": i for i in range(30_000)}}))
    honest = services(fixed_skill("honest", "fine", 0.5))
    client = agent(
        {
            "services": {
                "annotators": {
                    "deep": service_entry(deep_annotator.url),
                    "nan": service_entry(nan_annotator.url),
                    "huge": service_entry(huge_number.url),
                    "surrogate": service_entry(surrogate.url),
                },
                "skills": {
                    "hostile": service_entry(many_keys.url),
                    "honest": service_entry(honest.url),
                },
            }
        }
    )
    answer = client.post("/", json={"user_id": "ann", "payload": "attack"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["response"] == "fine"
    dialog = user_dialog(client, "ann")
    human = dialog["utterances"][0]
    assert sorted(errors_of(human)) == [
        ("deep", "refused"),
        ("hostile", "refused"),
        ("huge", "refused"),
        ("nan", "refused"),
        ("surrogate", "refused"),
    ]
    messages = {e["service"]: e["message"] for e in human["errors"]}
    assert "MAX_JSON_DEPTH" in messages["deep"]
    assert "NaN and Infinity are refused" in messages["nan"]
    assert "inf" in messages["huge"]
    assert "surrogate" in messages["surrogate"]
    assert "MAX_JSON_ITEMS" in messages["hostile"]
    assert human["annotations"] == {} and dialog["human"]["attributes"] == {}
    again = client.post("/", json={"user_id": "ann", "payload": "hello"})
    assert again.status_code == 200 and again.json()["response"] in ("fine", "plain")


# -- 3. client input that could never be stored ---------------------------------------------


def test_non_json_numbers_and_lone_surrogates_from_a_client_are_a_422(
    services: Services,
    agent: AgentFactory,
) -> None:
    skill = services(fixed_skill("echo", "ok", 0.5))
    client = agent({"services": {"skills": {"echo": service_entry(skill.url)}}})
    headers = {"Content-Type": "application/json"}
    bodies = {
        '{"user_id": "ann", "payload": "hi", "score": NaN}': "nan",
        '{"user_id": "ann", "payload": "hi", "score": Infinity}': "inf",
        '{"user_id": "ann", "payload": "hi", "score": 1e400}': "inf",
        '{"user_id": "ann", "payload": "hi", "big": 123456789012345678901234567890}': "64-bit",
        '{"user_id": "ann", "payload": "\\ud800"}': "unicode",
        '{"user_id": "ann", "payload": "hi", "note": "\\udc00"}': "unicode",
        '{"user_id": "ann", "payload": "hi", "\\ud800": 1}': "unicode",
    }
    for body, reason in bodies.items():
        refused = client.post("/", content=body, headers=headers)
        assert refused.status_code == 422, (body, refused.text)
        assert reason in refused.text.lower(), (body, refused.text)
    observation = client.post(
        "/api/v1/chat",
        content='{"user_id": "ann", "text": "hi", "label_candidates": ["\\ud800"]}',
        headers=headers,
    )
    assert observation.status_code == 422 and "unicode" in observation.text.lower()
    fine = client.post("/", json={"user_id": "ann", "payload": "hi"})
    assert fine.status_code == 200
    assert [u["text"] for u in user_dialog(client, "ann")["utterances"]] == ["hi", "ok"]


def test_an_attribute_merge_of_many_keys_is_stored_whole(
    services: Services,
    agent: AgentFactory,
) -> None:
    """SQLite caps a function's arguments; a merge of more keys than that still lands."""
    attributes = {f"key{i}": {"n": i} for i in range(500)}
    skill = services(attacker_skill({"human_attributes": attributes}))
    client = agent({"services": {"skills": {"hostile": service_entry(skill.url)}}})
    answer = client.post("/", json={"user_id": "ann", "payload": "attack"})
    assert answer.status_code == 200, answer.text
    assert user_dialog(client, "ann")["human"]["attributes"] == attributes


def test_attributes_cannot_grow_past_their_key_limit(
    services: Services,
    agent: AgentFactory,
) -> None:
    skill = services(counting_keys_skill())
    client = agent(
        {"services": {"skills": {"keys": service_entry(skill.url)}}},
        limits=StorageLimits(max_attribute_keys=25),
    )
    for turn in range(3):  # 10 new keys a turn: the third merge would make 30
        answer = client.post("/", json={"user_id": "ann", "payload": f"turn {turn}"})
        assert answer.status_code == 200, answer.text
    dialog = user_dialog(client, "ann")
    assert len(dialog["human"]["attributes"]) == 20
    last = dialog["utterances"][-2]
    assert errors_of(last) == [("keys", "refused")]
    assert "MAX_ATTRIBUTE_KEYS" in last["errors"][0]["message"]


def counting_keys_skill() -> FastAPI:
    service = Service("keys")

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        start = len(dialog.human.attributes)
        return SkillHypothesis(
            text=f"now {start + 10}",
            confidence=0.9,
            human_attributes={f"k{start + i}": i for i in range(10)},
        )

    return service.app


@ALL_STORES
def test_a_turn_over_the_document_budget_keeps_its_answer(
    services: Services,
    agent: AgentFactory,
) -> None:
    """Each output fits, together they would not: the last ones are refused, the turn
    is stored and answered."""
    blob = "x" * 40_000
    annotators = {f"a{i}": service_entry(services(raw_app(json_body=[blob])).url) for i in range(3)}
    skill = services(fixed_skill("echo", "ok", 0.5))
    client = agent(
        {"services": {"annotators": annotators, "skills": {"echo": service_entry(skill.url)}}},
        limits=StorageLimits(max_document_bytes=100_000),
    )
    answer = client.post("/", json={"user_id": "ann", "payload": "hi"})
    assert answer.status_code == 200 and answer.json()["response"] == "ok"
    human = user_dialog(client, "ann")["utterances"][0]
    assert len(human["annotations"]) == 2 and set(human["annotations"].values()) == {blob}
    (refused,) = human["errors"]
    assert refused["kind"] == "refused" and "MAX_DOCUMENT_BYTES" in refused["message"]


def test_a_document_the_database_refuses_is_stored_without_the_outputs(
    services: Services,
    agent: AgentFactory,
    db_url: str,
) -> None:
    """With the bounds opened wide (past MongoDB's 16 MB), nine annotators make an
    utterance of about 17 MB: MongoDB refuses it, and the turn is kept without the services'
    outputs, the refusal recorded; SQLite stores it whole. Each output is one string just
    under the 2 MiB a service's answer may take, from one server the nine entries share:
    as large as nested lists would make it, a fraction of their cost to encode, parse and
    measure."""
    url = services(raw_app(json_body=["a" * 1_900_000])).url
    annotators = {f"a{i}": service_entry(url, timeout=60) for i in range(9)}
    skill = services(fixed_skill("echo", "ok", 0.5))
    client = agent(
        {
            "services": {
                "annotators": annotators,
                "skills": {"echo": service_entry(skill.url, timeout=60)},
            },
            "turn_timeout": 90,
        },
        limits=StorageLimits(
            max_bytes=8_000_000, max_document_bytes=20_000_000, max_items=1_000_000
        ),
    )
    # the client waits as long as the turn may take (its 30 s default is less than the
    # turn_timeout opened wide above: on a busy machine the 16 MB turn takes longer)
    answer = client.post("/", json={"user_id": "ann", "payload": "hi"}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["response"] == "ok"
    human = user_dialog(client, "ann")["utterances"][0]
    if db_url.startswith("sqlite"):
        assert human["errors"] == [] and len(human["annotations"]) == len(annotators)
    else:
        assert human["annotations"] == {} and human["hypotheses"] == []
        assert errors_of(human) == [("store", "refused")]
    next_turn = client.post("/", json={"user_id": "ann", "payload": "next"}, timeout=120)
    assert next_turn.status_code == 200
