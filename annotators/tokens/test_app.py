"""The tokens annotator over real HTTP."""

from agent.sdk.testing import ServiceClient, view
from annotators.tokens.app import app


def test_sentences_and_tokens_per_dialog() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={"dialogs": [view("Hi there! I don't know. Really?"), view("ok")]},
        ).json()
    assert answer[0]["sentences"] == ["Hi there!", "I don't know.", "Really?"]
    assert answer[0]["tokens"][:5] == ["Hi", "there", "!", "I", "don't"]
    assert answer[1] == {"sentences": ["ok"], "tokens": ["ok"]}


def test_bad_input_is_refused_with_a_message() -> None:
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialogs": []})
    assert response.status_code == 422
    assert "at least 1 item" in response.text


def test_health() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
    assert health == {"status": "ok", "service": "tokens", "role": "annotator"}
