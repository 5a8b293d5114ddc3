"""MongoDB going away under traffic: 503 with Retry-After, then recovery on its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.api.app import create_app
from agent.settings import Settings
from skills.greeting.app import app as greeting_app
from tests.conftest import service_entry
from tests.support.mongo_server import mongodb_required, running_ferretdb, unavailable_reason
from tests.support.servers import serving

pytestmark = pytest.mark.skipif(
    unavailable_reason() is not None and not mongodb_required(), reason=unavailable_reason() or ""
)


def test_a_database_outage_is_a_503_and_the_agent_recovers(services: Any, tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(
            {"services": {"skills": {"greeting": service_entry(services(greeting_app).url)}}}
        )
    )
    with running_ferretdb() as db:
        app = create_app(Settings(db_url=f"{db.url}chorus_outage", pipeline=pipeline))
        with serving(app) as agent, httpx.Client(base_url=agent.url, timeout=30) as client:
            first = client.post("/", json={"user_id": "u", "payload": "my name is Ann"})
            assert first.status_code == 200
            db.stop()
            # The store's own bound (3 s) answers; PyMongo's (30 s) would time this
            # client out first.
            down = client.post("/", json={"user_id": "u", "payload": "hello"}, timeout=20)
            assert down.status_code == 503
            assert down.headers["retry-after"].isdigit()
            assert "database is unavailable" in down.json()["message"]
            assert client.get("/api/user/u").status_code == 503
            db.start()
            back = client.post("/", json={"user_id": "u", "payload": "hello"})
            assert back.status_code == 200, back.text
            assert back.json()["response"] == "Hello again, Ann!"
            assert back.json()["dialog_id"] == first.json()["dialog_id"]
