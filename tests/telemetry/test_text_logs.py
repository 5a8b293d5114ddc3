"""Text logs: what a service or a client sends stays on its line. A newline in an error
body, or in a skill name a selector made up, would otherwise start a line of its own that
a reader (or a log shipper) takes for one the agent wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from agent.state.storage_limits import MAX_ATTRIBUTE_KEYS
from tests.conftest import service_entry
from tests.dream import services as dream
from tests.dream.test_dream_behaviour import selector, skill
from tests.support.processes import agent_process
from tests.support.servers import serving
from tests.support.services import raw_app

#: Line breaks a text log reader splits on: a newline, CR LF, and Unicode's line separator.
FORGED = "x\nFORGED chorus: all fine\r\nFORGED again\u2028FORGED once more"


def forging_selector() -> FastAPI:
    """A dp-agent response selector crediting a skill whose name carries lines, with
    attributes over the bound, so the agent logs the refusal under that name."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        body = await request.json()
        over = {f"k{i}": i for i in range(MAX_ATTRIBUTE_KEYS + 1)}
        return [[FORGED, "an answer", 0.9, over, {}] for _ in body["dialogs"]]

    return app


def chorus_pipeline(urls: dict[str, str]) -> dict[str, Any]:
    return {
        "services": {
            "skills": {
                "forger": service_entry(urls["failing"]),
                "greeting": service_entry(urls["greeting"]),
            }
        }
    }


def dream_pipeline(urls: dict[str, str]) -> dict[str, Any]:
    return {
        "services": {
            "skills": {
                "forger": skill(urls["failing"]),
                "eliza": skill(urls["eliza"]),
            },
            "response_selector": selector(urls["selector"]),
        }
    }


@pytest.mark.parametrize("pipeline", [chorus_pipeline, dream_pipeline], ids=["chorus", "dream"])
def test_no_line_of_the_text_log_is_forged_by_what_a_service_sends(
    tmp_path: Path, pipeline: Any
) -> None:
    from skills.greeting.app import app as greeting_app

    apps = {
        "failing": raw_app(body=FORGED, status=500),
        "greeting": greeting_app,
        "eliza": dream.eliza(),
        "selector": forging_selector(),
    }
    log = tmp_path / "agent.log"
    with ExitStack() as stack:
        urls = {name: stack.enter_context(serving(app)).url for name, app in apps.items()}
        path = tmp_path / "pipeline.json"
        path.write_text(json.dumps(pipeline(urls)))
        env = {
            "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
            "CHORUS_PIPELINE": str(path),
            "CHORUS_LOG_FORMAT": "text",
        }
        with log.open("wb") as err, agent_process(env, stderr=err) as (base, _):
            reply = httpx.post(base + "/", json={"user_id": "u", "payload": "hi"}, timeout=30)
            assert reply.status_code == 200, reply.text
    text = log.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith("FORGED")], text
    assert "answered HTTP 500: x\\nFORGED chorus: all fine\\r\\nFORGED again\\u2028" in text
    if pipeline is dream_pipeline:
        assert "x\\nFORGED chorus: all fine\\r\\nFORGED again\\u2028FORGED once more: human" in text


#: What an in-process service's HTTP client logs for one call, and one of the agent's lines.
CLIENT_LINES = """
import logging, sys
from agent.telemetry import configure_logging
configure_logging(sys.argv[1], "text")
logging.getLogger("httpx").info('HTTP Request: POST https://llm.example/v1?key=s3cret "200 OK"')
logging.getLogger("chorus").info("agent line")
"""


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_an_http_clients_request_lines_show_only_at_debug(level: str, shown: bool) -> None:
    """At INFO the agent's log has its own lines but not one per call an in-process
    service makes (its URL may hold a vendor's key); at DEBUG it has both."""
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_LINES, level],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "agent line" in done.stderr
    assert ("s3cret" in done.stderr) is shown, done.stderr
