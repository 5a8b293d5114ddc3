"""JSON logs: every line of the agent's process is one JSON object, and those logged inside
a turn carry its dialog id, utterance id and the trace id of its span."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from skills.greeting.app import app as greeting_app
from tests.conftest import service_entry
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT, wait_until_up
from tests.support.servers import serving

API_KEY = "k" * 32


def json_objects(text: str) -> list[dict[str, object]]:
    """The console exporter writes indented JSON objects one after another."""
    decoder, objects, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(text, at)) < len(text):
        value, at = decoder.raw_decode(text, at)
        objects.append(value)
    return objects


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def test_json_log_lines_carry_the_turn_ids_and_its_trace_id(tmp_path: Path) -> None:
    with serving(greeting_app) as greeting:
        pipeline = tmp_path / "pipeline.json"
        pipeline.write_text(
            json.dumps(
                {
                    "services": {
                        "skills": {
                            "greeting": service_entry(greeting.url),
                            "gone": service_entry(f"http://127.0.0.1:{free_port()}"),
                        }
                    }
                }
            )
        )
        port = free_port()
        env = {
            **os.environ,
            "CHORUS_LOG_FORMAT": "json",
            "CHORUS_API_KEY": API_KEY,
            "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
            "CHORUS_PIPELINE": str(pipeline),
            "OTEL_TRACES_EXPORTER": "console",
        }
        stderr, stdout = tmp_path / "stderr.log", tmp_path / "stdout.log"
        with stderr.open("wb") as err, stdout.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "--factory",
                    "agent.api.app:create_app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env=env,
                stdout=out,
                stderr=err,
            )
            try:
                base = f"http://127.0.0.1:{port}"
                wait_until_up(base + "/ping", process)
                reply = httpx.post(
                    base + "/", json={"user_id": "ann", "payload": "hi"}, timeout=30
                ).json()
                dialog = httpx.get(
                    f"{base}/api/dialogs/{reply['dialog_id']}",
                    timeout=30,
                    headers={"X-API-Key": API_KEY},
                ).json()
            finally:
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=COMMAND_TIMEOUT) in (0, -signal.SIGTERM)

    lines = [json.loads(line) for line in stderr.read_text().splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line["logger"] == "uvicorn.error" for line in lines), "server lines are JSON"
    in_turn = [line for line in lines if "gone" in str(line["message"])]
    assert in_turn, "the unreachable service's failure should be logged"
    turn_span = next(
        span for span in json_objects(stdout.read_text()) if span.get("name") == "chorus.turn"
    )
    trace_id = str(turn_span["context"]["trace_id"]).removeprefix("0x")  # type: ignore[index]
    for line in in_turn:
        assert line["level"] == "WARNING"
        assert line["dialog_id"] == reply["dialog_id"]
        assert line["utt_id"] == dialog["utterances"][0]["utt_id"]
        assert line["trace_id"] == trace_id
    outside = [line for line in lines if "Chorus agent ready" in str(line["message"])]
    assert outside and "dialog_id" not in outside[0]
