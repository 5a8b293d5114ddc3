"""A turn that fails after it started: the event stream ends with an ``error`` event that
carries what a JSON client would have got (503, the same body), over real HTTP with
MongoDB (FerretDB) going away mid-turn."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.api.app import create_app
from agent.settings import Settings
from tests.conftest import service_entry
from tests.support.events import parse_sse
from tests.support.mongo_server import mongodb_required, running_ferretdb, unavailable_reason
from tests.support.servers import serving
from tests.support.services import choosing_skill_selector, gated_story

pytestmark = pytest.mark.skipif(
    unavailable_reason() is not None and not mongodb_required(), reason=unavailable_reason() or ""
)


def test_the_database_going_away_mid_turn_is_an_error_event_with_the_json_error(
    services: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.api.composition.END_RETRY", 0.5)
    gate = threading.Event()
    pipeline = tmp_path / "pipeline.json"
    selector = services(choosing_skill_selector("story")).url
    story = services(gated_story(gate)).url
    pipeline.write_text(
        json.dumps(
            {
                "services": {
                    "skill_selectors": {"picker": service_entry(selector)},
                    "skills": {"story": service_entry(story, 30.0, stream=True)},
                },
                "turn_timeout": 30.0,
            }
        )
    )
    try:
        with running_ferretdb() as db:
            settings = Settings(db_url=f"{db.url}chorus_sse", pipeline=pipeline)
            with (
                serving(create_app(settings)) as agent,
                httpx.Client(base_url=agent.url, timeout=30) as client,
                client.stream(
                    "POST",
                    "/",
                    json={"user_id": "u", "payload": "Tell me a story"},
                    headers={"Accept": "text/event-stream"},
                ) as response,
            ):
                assert response.status_code == 200
                lines: list[str] = []
                for line in response.iter_lines():
                    lines.append(line)
                    if line == "event: token":
                        db.stop()  # the turn has started: its end cannot be stored now
                        gate.set()
                events = parse_sse([*lines, ""])
    finally:
        gate.set()
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "accepted" and "token" in kinds
    assert events[-1] == (
        "error",
        {
            "status": 503,
            "error": "unavailable",
            "message": "the database is unavailable; retry shortly",
            "fields": [],
        },
    )
