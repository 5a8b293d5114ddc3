"""SIGTERM: the agent stops taking turns, finishes the one in flight, and exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import patient, service_entry
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT, STARTUP_TIMEOUT
from tests.support.services import fixed_skill


def test_sigterm_finishes_the_turn_in_flight(services: Any, tmp_path: Path) -> None:
    slow = services(fixed_skill("slow", "worth the wait", 0.9, delay=1.5))
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(patient({"services": {"skills": {"slow": service_entry(slow.url)}}}))
    )
    port = free_port()
    env = {
        **os.environ,
        "CHORUS_PIPELINE": str(pipeline),
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
    }
    agent = subprocess.Popen(
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
            "--log-level",
            "warning",
        ],
        env=env,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:  # readiness probe
            try:
                httpx.get(f"{base}/ping").raise_for_status()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and agent.poll() is None
                time.sleep(0.05)
        answers: list[httpx.Response] = []
        chat = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{base}/", json={"user_id": "u", "payload": "hi"}, timeout=30)
            )
        )
        chat.start()
        while "chorus_turns_in_flight 1.0" not in httpx.get(f"{base}/metrics").text:
            assert chat.is_alive(), "the turn ended before the signal could be sent"
            time.sleep(0.01)  # probe until the turn is in flight
        agent.send_signal(signal.SIGTERM)
        chat.join(timeout=30)
        # uvicorn re-raises the signal once its graceful shutdown is done, so the exit
        # status says "terminated by SIGTERM" after a clean shutdown.
        assert agent.wait(timeout=COMMAND_TIMEOUT) in (0, -signal.SIGTERM)
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.wait()
        if agent.stderr:
            agent.stderr.close()
    (answer,) = answers
    assert answer.status_code == 200
    assert answer.json()["response"] == "worth the wait"
    try:
        httpx.get(f"{base}/ping", timeout=1)
        raise AssertionError("the agent still answers after SIGTERM")
    except httpx.TransportError:
        pass
