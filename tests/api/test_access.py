"""Access control, CORS and the body size limit, as a client meets them."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from websockets.sync.client import connect

from skills.fallback.app import app as fallback_app
from tests.conftest import AgentFactory, service_entry

KEY = "s3cret-key-for-tests-0123"


def pipeline(services: Any) -> dict[str, Any]:
    return {"services": {"skills": {"fallback": service_entry(services(fallback_app).url)}}}


def test_reads_need_the_key_when_one_is_set(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services), api_key=KEY)
    reply = client.post("/", json={"user_id": "u", "payload": "hi"}).json()  # chat stays open
    path = f"/api/dialogs/{reply['dialog_id']}"
    missing = client.get(path)
    assert missing.status_code == 401
    assert "X-API-Key" in missing.json()["message"]
    assert client.get(path, headers={"X-API-Key": "wrong"}).status_code == 403
    assert client.get("/api/user/u", headers={"X-API-Key": "wrong"}).status_code == 403
    ok = client.get(path, headers={"X-API-Key": KEY})
    assert ok.status_code == 200 and ok.json()["dialog_id"] == reply["dialog_id"]


def test_chat_can_be_protected_too(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services), api_key=KEY, protect_chat=True)
    assert client.post("/", json={"user_id": "u", "payload": "hi"}).status_code == 401
    assert client.post("/api/v1/chat", json={"user_id": "u", "text": "hi"}).status_code == 401
    ok = client.post("/", json={"user_id": "u", "payload": "hi"}, headers={"X-API-Key": KEY})
    assert ok.status_code == 200


@pytest.mark.store_agnostic
def test_open_reads_are_warned_about_at_start_up(
    services: Any, agent: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="chorus"):
        agent(pipeline(services))
    assert any("CHORUS_API_KEY is not set" in r.getMessage() for r in caplog.records)


@pytest.mark.store_agnostic
def test_oversized_bodies_get_a_413(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services), max_body_bytes=2048)
    big = client.post("/", json={"user_id": "u", "payload": "x" * 5000})
    assert big.status_code == 413
    assert "CHORUS_MAX_BODY_BYTES" in big.json()["message"]

    def chunks() -> Any:
        yield b'{"user_id": "u", "payload": "'
        for _ in range(10):
            yield b"y" * 500
        yield b'"}'

    streamed = client.post("/", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413


@pytest.mark.store_agnostic
def test_cors_is_off_by_default_and_allows_only_configured_origins(
    services: Any, agent: AgentFactory
) -> None:
    preflight = {"Origin": "https://chat.example.org", "Access-Control-Request-Method": "POST"}
    closed = agent(pipeline(services))
    assert "access-control-allow-origin" not in closed.options("/", headers=preflight).headers
    client = agent(pipeline(services), cors_origins=["https://chat.example.org"])
    allowed = client.options("/", headers=preflight)
    assert allowed.headers["access-control-allow-origin"] == "https://chat.example.org"
    other = client.options("/", headers={**preflight, "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_bad_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.settings import SettingsError, load_settings

    monkeypatch.setenv("CHORUS_DB_URL", "postgres://x")
    with pytest.raises(SettingsError, match="CHORUS_DB_URL: use sqlite"):
        load_settings()
    monkeypatch.delenv("CHORUS_DB_URL")
    monkeypatch.setenv("CHORUS_PROTECT_CHAT", "true")
    with pytest.raises(SettingsError, match="CHORUS_PROTECT_CHAT: protect_chat is true but"):
        load_settings()
    monkeypatch.setenv("CHORUS_API_KEY", "short")
    with pytest.raises(SettingsError, match="CHORUS_API_KEY: must be at least 16 characters"):
        load_settings()


def test_a_user_can_be_erased_with_the_key(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services), api_key=KEY)
    reply = client.post("/", json={"user_id": "gone", "payload": "hi"}).json()
    key = {"X-API-Key": KEY}
    assert client.delete("/api/user/gone").status_code == 401
    assert client.delete("/api/user/gone", headers=key).status_code == 204
    assert client.get("/api/user/gone", headers=key).status_code == 404
    assert client.get(f"/api/dialogs/{reply['dialog_id']}", headers=key).status_code == 404
    assert client.delete("/api/user/gone", headers=key).status_code == 404


@pytest.mark.store_agnostic
@pytest.mark.served  # a WebSocket
def test_metrics_and_the_load_numbers_need_the_key_unless_they_are_public(
    services: Any, agent: AgentFactory
) -> None:
    """``/metrics`` and ``/debug/current_load``'s numbers carry the same counts: one rule
    for both, the reader's key unless ``CHORUS_METRICS_PUBLIC`` is true."""
    figures = ("/metrics", "/debug/current_load?format=json")
    client = agent(pipeline(services), api_key=KEY)
    for path in figures:
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"X-API-Key": KEY}).status_code == 200, path
    public = agent(pipeline(services), api_key=KEY, metrics_public=True)
    for path in figures:
        assert public.get(path).status_code == 200, path
    load_ws = (
        str(public.base_url).replace("http://", "ws://").rstrip("/") + "/debug/current_load/ws"
    )
    with connect(load_ws, open_timeout=10) as ws:
        assert set(json.loads(ws.recv(timeout=30))) == {"current_load", "response_time"}
    assert public.get("/api/user/u").status_code == 401  # the dialogs still need the key
