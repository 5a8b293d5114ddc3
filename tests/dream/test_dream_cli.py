"""`chorus run` with a dp-agent pipeline file: only the agent starts (Dream's services run
from Dream's compose files); a bad entry stops it, named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.cli.test_run import wait_for
from tests.support.processes import COMMAND_TIMEOUT
from tests.support.servers import free_port

CANNED = {
    "services": {
        "answer": {
            "connector": {
                "protocol": "python",
                "class_name": "PredefinedOutputConnector",
                "output": {
                    "skill_name": "canned",
                    "text": "Hello from dp-agent",
                    "confidence": 1.0,
                },
            },
            "state_manager_method": "add_bot_utterance",
        }
    }
}


def test_run_starts_the_agent_on_a_dp_agent_file(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline_conf.json"
    pipeline.write_text(json.dumps(CANNED))
    port = free_port()
    env = {
        **os.environ,
        "CHORUS_PIPELINE": str(pipeline),
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.cli.main", "run", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/ping", process)
        reply = httpx.post(
            f"http://127.0.0.1:{port}/", json={"user_id": 7, "payload": "hi"}, timeout=10
        ).json()
    finally:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=COMMAND_TIMEOUT)
    assert reply["response"] == "Hello from dp-agent"
    assert reply["user_id"] == 7
    assert b"its services are not started here" in out


def test_run_refuses_a_bad_dp_agent_file_naming_the_entry(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline_conf.json"
    bad = json.loads(json.dumps(CANNED))
    bad["services"]["answer"]["dialog_formatter"] = "state_formatters.dp_formatters:x"
    pipeline.write_text(json.dumps(bad))
    result = subprocess.run(
        [sys.executable, "-m", "agent.cli.main", "run"],
        capture_output=True,
        text=True,
        env={**os.environ, "CHORUS_PIPELINE": str(pipeline)},
        timeout=COMMAND_TIMEOUT,
    )
    assert result.returncode == 2
    assert "services.answer.dialog_formatter: cannot import 'state_formatters" in result.stderr
    assert "PYTHONPATH" in result.stderr
