"""`chorus run` with a dp-agent pipeline file: only the agent starts (Dream's services run
from Dream's compose files); a bad entry stops it, named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import httpx
from typer.testing import CliRunner

from agent.cli.main import app
from tests.cli.test_run import wait_for
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT

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
    # In the test's process: the refusal is the command's output and exit code.
    result = CliRunner().invoke(app, ["run"], env={"CHORUS_PIPELINE": str(pipeline)})
    assert result.exit_code == 2
    assert "services.answer.dialog_formatter: cannot import 'state_formatters" in result.stderr
    assert "PYTHONPATH" in result.stderr


#: A python connector written as Dream's are: its module configures the root logger for
#: DEBUG when it is imported, and it logs at every level when called.
NOISY_CONNECTOR = """
import logging

logging.basicConfig(level=logging.DEBUG)
logging.getLogger().setLevel(logging.DEBUG)
log = logging.getLogger("noisy_connector")


class Noisy:
    async def send(self, payload, callback):
        logging.getLogger().setLevel(logging.DEBUG)  # and once more, at call time
        log.debug("NOISY DEBUG LINE")
        log.warning("noisy warning line")
        await callback(
            task_id=payload["task_id"],
            response={"skill_name": "noisy", "text": "quiet please", "confidence": 1.0},
        )
"""


def test_the_agents_log_level_holds_whatever_a_loaded_module_sets(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "noisy_connector.py").write_text(dedent(NOISY_CONNECTOR))
    pipeline = tmp_path / "pipeline_conf.json"
    noisy = {"protocol": "python", "class_name": "noisy_connector:Noisy"}
    pipeline.write_text(
        json.dumps(
            {
                "services": {
                    "answer": {"connector": noisy, "state_manager_method": "add_bot_utterance"}
                }
            }
        )
    )
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "CHORUS_PIPELINE": str(pipeline),
        "CHORUS_DB_URL": db_url,
        "CHORUS_LOG_LEVEL": "INFO",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.cli.main", "run", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/ping", process)
        for turn in range(3):
            reply = httpx.post(
                f"http://127.0.0.1:{port}/", json={"user_id": "u", "payload": f"hi {turn}"}
            )
            assert reply.json()["response"] == "quiet please"
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    logged = (out + err).decode()
    assert logged.count("noisy warning line") == 3  # the agent's own level: INFO and up
    debug = [line for line in logged.splitlines() if " DEBUG " in line or "DEBUG:" in line]
    assert debug == [], f"{len(debug)} DEBUG lines, the first: {debug[:3]}"
