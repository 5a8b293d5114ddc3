"""The web pages and the JSON they read, over HTTP against the real agent.

What a browser does with them is in tests/browser; here: the pages and every file they
load are served, ``/api/pipeline`` describes the configured graph and counts what
happened, and it is guarded by the API key like the dialogs.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import httpx
import pytest

from response_selectors.confidence.app import app as confidence_app
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry
from tests.support.services import fixed_skill, length_annotator, raw_app

KEY = "s3cret-key-for-tests-0123"
PAGES = ["/chat", "/inspect/0123abcd", "/inspect", "/pipeline", "/inbox"]


def pipeline(services: Any) -> dict[str, Any]:
    """Two annotators (one waiting for the other), a good, a broken and a slow skill, a
    skill that needs the second annotator, and a response selector."""
    return {
        "services": {
            "annotators": {
                "first": service_entry(services(length_annotator("first")).url),
                "second": service_entry(
                    services(length_annotator("second")).url, previous_services=["first"]
                ),
            },
            "skills": {
                "greeting": service_entry(services(greeting_app).url),
                "fallback": service_entry(
                    services(fallback_app).url, required_previous_services=["second"]
                ),
                "broken": service_entry(services(raw_app("down", status=500)).url),
                "slow": service_entry(
                    services(fixed_skill("slow", "late", 0.9, delay=1.0)).url, timeout=0.2
                ),
            },
            "response_selectors": {"confidence": service_entry(services(confidence_app).url)},
        },
    }


@pytest.fixture(scope="module")
def served_pipeline(shared_services: Any) -> dict[str, Any]:
    """:func:`pipeline` on services started once for the module: they keep nothing between
    calls (what the tests count, the agent counts), so each test's own agent may call the
    same ones, instead of 7 servers started for each test."""
    return pipeline(shared_services)


@pytest.fixture(scope="module")
def shared_client(served_pipeline: dict[str, Any], shared_agent: AgentFactory) -> httpx.Client:
    """An agent on :func:`pipeline`, shared by the tests that only read its pages and its
    description."""
    return shared_agent(served_pipeline)


def say(client: httpx.Client, text: str) -> dict[str, Any]:
    response = client.post("/", json={"user_id": "page-user", "payload": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.store_agnostic
def test_pages_and_everything_they_load_are_served(shared_client: httpx.Client) -> None:
    client = shared_client
    for path in PAGES:
        page = client.get(path)
        assert page.status_code == 200, path
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assets = re.findall(r'(?:src|href)="(/pages/[^"]+)"', page.text)
        assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
        for asset in assets:
            loaded = client.get(asset)
            assert loaded.status_code == 200, asset
            kind = "javascript" if asset.endswith(".js") else "css"
            assert kind in loaded.headers["content-type"], asset
        # The scripts import the shared module; it is served too.
    assert client.get("/pages/common.js").status_code == 200
    assert client.get("/pages/missing.js").status_code == 404


def test_a_browser_at_the_root_lands_on_the_chat(
    served_pipeline: dict[str, Any], agent: AgentFactory
) -> None:
    client = agent(served_pipeline)
    root = client.get("/")
    assert root.status_code == 307 and root.headers["location"] == "/chat"
    assert say(client, "Hello!")["active_skill"] == "greeting"  # POST / is still the chat


@pytest.mark.store_agnostic
def test_pages_stay_out_of_the_api_schema(shared_client: httpx.Client) -> None:
    paths = shared_client.get("/openapi.json").json()["paths"]
    assert "/api/pipeline" in paths
    assert not {"/chat", "/pipeline", "/inspect/{dialog_id}", "/inbox"} & set(paths)


@pytest.mark.store_agnostic
def test_the_pipeline_is_described_stage_by_stage(shared_client: httpx.Client) -> None:
    info = shared_client.get("/api/pipeline").json()
    assert [s["role"] for s in info["stages"]] == ["annotators", "skills", "response_selectors"]
    by_name = {s["name"]: s for s in info["services"]}
    assert set(by_name) == {
        "first",
        "second",
        "greeting",
        "fallback",
        "broken",
        "slow",
        "confidence",
    }
    assert {(s["name"], s["role"], s["dream_group"]) for s in info["services"]} == {
        ("first", "annotators", None),
        ("second", "annotators", None),
        ("greeting", "skills", None),
        ("fallback", "skills", None),
        ("broken", "skills", None),
        ("slow", "skills", None),
        ("confidence", "response_selectors", None),
    }
    assert by_name["second"]["previous_services"] == ["first"]
    assert by_name["slow"]["timeout"] == 0.2
    assert by_name["greeting"]["target"].startswith("http://127.0.0.1:")
    # A service waiting for another of its stage is drawn one column to its right; stages
    # follow each other.
    assert by_name["second"]["column"] == by_name["first"]["column"] + 1
    assert {by_name[s]["column"] for s in ("greeting", "fallback", "broken", "slow")} == {2}
    assert by_name["confidence"]["column"] == 3
    assert sorted(by_name[s]["row"] for s in ("greeting", "fallback", "broken", "slow")) == [
        0,
        1,
        2,
        3,
    ]
    assert {(e["source"], e["target"], e["required"]) for e in info["edges"]} == {
        ("first", "second", False),
        ("second", "fallback", True),
    }
    mermaid = info["mermaid"]
    assert mermaid.startswith("flowchart LR\n")
    for name in by_name:
        assert f'["{name}"]' in mermaid
    assert "annotators --> skills" in mermaid and "skills --> response_selectors" in mermaid
    assert "==>" in mermaid and "-.->" in mermaid


def test_pipeline_stats_count_calls_errors_and_timeouts(
    served_pipeline: dict[str, Any], agent: AgentFactory
) -> None:
    client = agent(served_pipeline)
    before = client.get("/api/pipeline").json()
    assert before["turns"] == 0
    assert before["stats"]["broken"] == {
        "calls": 0,
        "errors": 0,
        "dropped": 0,
        "timeouts": 0,
        "skipped": 0,
        "error_rate": None,
        "p50_seconds": None,
        "p95_seconds": None,
        "window": 0,
    }
    for _ in range(3):
        say(client, "Hello!")
    stats = client.get("/api/pipeline").json()
    assert stats["turns"] == 3
    good, broken, slow = (stats["stats"][n] for n in ("greeting", "broken", "slow"))
    assert (good["calls"], good["errors"], good["error_rate"]) == (3, 0, 0.0)
    assert 0 < good["p50_seconds"] <= good["p95_seconds"]
    assert (broken["calls"], broken["errors"], broken["timeouts"]) == (3, 3, 0)
    assert broken["error_rate"] == 1.0
    assert (slow["calls"], slow["errors"], slow["timeouts"]) == (3, 3, 3)
    # A timed-out call lasts its 0.2 s timeout, as the loop's timer counts it: the call's
    # own clock reading may start a hair later (0.19998 s was seen).
    assert slow["p50_seconds"] >= 0.19


def test_a_service_skipped_for_a_failed_requirement_is_counted_as_skipped(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "annotators": {"down": service_entry(services(raw_app("x", status=503)).url)},
                "skills": {
                    "needs": service_entry(
                        services(fixed_skill("needs", "hi", 0.5)).url,
                        required_previous_services=["down"],
                    ),
                    "greeting": service_entry(services(greeting_app).url),
                },
            }
        }
    )
    say(client, "Hello!")
    stats = client.get("/api/pipeline").json()["stats"]
    assert (stats["down"]["calls"], stats["down"]["errors"]) == (1, 1)
    assert (stats["needs"]["calls"], stats["needs"]["skipped"]) == (0, 1)


@pytest.mark.parametrize("path", ["/api/pipeline", "/api/dialogs/0123abcd"])
def test_the_json_the_pages_read_needs_the_key(
    served_pipeline: dict[str, Any], agent: AgentFactory, path: str
) -> None:
    client = agent(served_pipeline, api_key=KEY)
    missing = client.get(path)
    assert missing.status_code == 401
    assert "X-API-Key" in missing.json()["message"]
    assert client.get(path, headers={"X-API-Key": "wrong"}).status_code == 403
    assert client.get(path, headers={"X-API-Key": KEY}).status_code in (200, 404)
    # The pages themselves hold no data: they load, and ask for the key when reading.
    assert client.get("/pipeline").status_code == 200
    assert client.get("/inspect/0123abcd").status_code == 200


def test_an_unknown_dialog_is_a_404_with_a_message(
    served_pipeline: dict[str, Any], agent: AgentFactory
) -> None:
    client = agent(served_pipeline)
    missing = client.get("/api/dialogs/0123abcd")
    assert missing.status_code == 404
    assert "0123abcd" in missing.json()["message"]
    dialog_id = say(client, "Hello!")["dialog_id"]
    assert client.get(f"/api/dialogs/{dialog_id}").status_code == 200


@pytest.mark.store_agnostic
def test_a_disabled_service_is_shown_as_disabled_with_why(
    served_pipeline: dict[str, Any], agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    config = copy.deepcopy(served_pipeline)
    skills = config["services"]["skills"]
    skills["llm"] = service_entry("http://127.0.0.1:9/respond", requires_env=["LLM_BASE_URL"])
    skills["retired"] = service_entry("http://127.0.0.1:9/respond", is_enabled=False)
    info = agent(config).get("/api/pipeline").json()
    assert {s["name"] for s in info["services"]}.isdisjoint({"llm", "retired"})
    assert info["disabled"] == [
        {
            "name": "llm",
            "role": "skills",
            "dream_group": None,
            "reason": "requires_env: LLM_BASE_URL not set",
        },
        {"name": "retired", "role": "skills", "dream_group": None, "reason": "is_enabled: false"},
    ]
