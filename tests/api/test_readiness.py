"""``GET /ready``: 503 while the store or a required service is unreachable, 200 when back.
``/ping`` (liveness) stays 200 throughout: the agent itself is fine."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from agent.api.app import create_app
from agent.sdk import DialogView, Service
from agent.settings import Settings
from skills.greeting.app import app as greeting_app
from tests.conftest import service_entry
from tests.support.mongo_server import mongodb_required, running_ferretdb, unavailable_reason
from tests.support.ports import free_port
from tests.support.servers import serving

needs_mongodb = pytest.mark.skipif(
    unavailable_reason() is not None and not mongodb_required(), reason=unavailable_reason() or ""
)


def ready_until(client: httpx.Client, status: int, within: float = 30.0) -> httpx.Response:
    """Ask ``/ready`` until it answers ``status`` (each answer takes at most the probe
    timeout, so this is a bounded number of real probes, not a timed wait)."""
    deadline = time.monotonic() + within
    while True:
        answer = client.get("/ready")
        if answer.status_code == status or time.monotonic() > deadline:
            return answer


@needs_mongodb
def test_ready_is_503_while_the_database_is_down_and_200_when_it_returns(
    services: Any, tmp_path: Path
) -> None:
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(
            {"services": {"skills": {"greeting": service_entry(services(greeting_app).url)}}}
        )
    )
    with running_ferretdb() as db:
        app = create_app(Settings(db_url=f"{db.url}chorus_ready", pipeline=pipeline))
        with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
            up = client.get("/ready")
            assert up.status_code == 200, up.text
            assert up.json() == {"ready": True, "store": "ok", "services": {}}
            db.stop()
            down = client.get("/ready")
            assert down.status_code == 503
            assert down.json()["ready"] is False and down.json()["store"] != "ok"
            assert down.headers["retry-after"].isdigit()
            assert client.get("/ping").status_code == 200
            db.start()
            back = ready_until(client, 200)
            assert back.status_code == 200, back.text
            turn = client.post("/", json={"user_id": "u", "payload": "hello"})
            assert turn.status_code == 200, turn.text


def test_ready_is_503_while_a_required_service_is_unreachable(
    services: Any, tmp_path: Path
) -> None:
    tokens = Service("tokens")

    @tokens.annotator
    def count(dialog: DialogView) -> int:
        return len(dialog.human_utterance.text.split())

    port = free_port()
    optional_port = free_port()  # nothing ever listens here: not required, so no matter
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(
            {
                "services": {
                    "annotators": {
                        "tokens": service_entry(f"http://127.0.0.1:{port}"),
                        "extra": service_entry(f"http://127.0.0.1:{optional_port}"),
                    },
                    "skills": {
                        "greeting": service_entry(
                            services(greeting_app).url, required_previous_services=["tokens"]
                        )
                    },
                }
            }
        )
    )
    settings = Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline)
    with (
        serving(create_app(settings)) as agent,
        httpx.Client(base_url=agent.url, timeout=30) as client,
    ):
        down = client.get("/ready")
        assert down.status_code == 503
        assert down.json()["store"] == "ok"
        assert set(down.json()["services"]) == {"tokens"}
        assert f"127.0.0.1:{port}" in down.json()["services"]["tokens"]
        with serving(tokens.app, port=port):
            up = client.get("/ready")
            assert up.status_code == 200, up.text
            assert up.json()["services"] == {"tokens": "ok"}
        assert client.get("/ready").status_code == 503


def test_ready_services_must_name_services_of_the_pipeline(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps({"services": {"skills": {"greeting": service_entry("http://127.0.0.1:9")}}})
    )
    settings = Settings(
        db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline, ready_services=["greting"]
    )
    with pytest.raises(ValueError, match="CHORUS_READY_SERVICES: greting not in the pipeline"):
        create_app(settings)


@needs_mongodb
def test_ready_without_the_api_key_says_what_is_down_but_not_where(
    services: Any, tmp_path: Path
) -> None:
    """The database's error names its host and port, a service's problem its URL: a
    caller without the key (a probe) reads only "down" and the service's name; the key's
    holder reads why."""
    port = free_port()
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(
            {
                "services": {
                    "annotators": {"tokens": service_entry(f"http://127.0.0.1:{port}")},
                    "skills": {
                        "greeting": service_entry(
                            services(greeting_app).url, required_previous_services=["tokens"]
                        )
                    },
                }
            }
        )
    )
    key = "k" * 32
    with running_ferretdb() as db:
        db_port = str(urlparse(db.url).port)
        app = create_app(Settings(db_url=f"{db.url}chorus_ready", pipeline=pipeline, api_key=key))
        with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
            db.stop()
            for headers in ({}, {"X-API-Key": "wrong" * 4}):
                brief = client.get("/ready", headers=headers)
                assert brief.status_code == 503
                assert brief.json() == {
                    "ready": False,
                    "store": "down",
                    "services": {"tokens": "down"},
                }
                assert db_port not in brief.text and str(port) not in brief.text
            detailed = client.get("/ready", headers={"X-API-Key": key})
            assert detailed.status_code == 503
            assert detailed.json()["store"] not in ("ok", "down")  # the driver's words
            assert f"127.0.0.1:{port}" in detailed.json()["services"]["tokens"]


@pytest.mark.store_agnostic
def test_every_route_is_built_before_the_agent_is_ready(
    services: Any, agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No request builds a route: FastAPI builds a route's parameters lazily otherwise, and
    hides pydantic's warning about each one with a filter that is not thread-safe, so two
    first requests at once (two agents in one process) could turn that warning into a
    500. Here the filter is switched off once the agent is ready, as another thread's
    ``catch_warnings`` could undo it, and each route still answers as it should."""
    client = agent(
        {"services": {"skills": {"greeting": service_entry(services(greeting_app).url)}}}
    )
    assert client.get("/ready").status_code == 200
    monkeypatch.setattr(warnings, "simplefilter", lambda *args, **kwargs: None)
    refused = client.post(
        "/", json={"user_id": "u", "payload": "x"}, headers={"Idempotency-Key": "no spaces"}
    )
    assert refused.status_code == 422 and "Idempotency-Key" in refused.json()["message"]
    bad_policy = client.post("/?double_texting=maybe", json={"user_id": "u", "payload": "x"})
    assert bad_policy.status_code == 422 and "double_texting" in bad_policy.json()["message"]
    assert client.get("/ping").status_code == 200
    assert client.get("/api/pipeline").status_code == 200
    assert client.get("/", follow_redirects=True).status_code == 200
