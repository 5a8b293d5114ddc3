"""`chorus run` (what `make run` calls): the whole local stack up, one answer, Ctrl-C down."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agent.cli.main import app
from tests.conftest import CLIENT_TIMEOUT, SERVICE_TIMEOUT, TURN_TIMEOUT
from tests.support import in_process
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT, STARTUP_TIMEOUT

#: The installed command, as `make run` calls it.
CHORUS = Path(sys.executable).parent / "chorus"


def wait_for(url: str, process: subprocess.Popen[bytes], timeout: float = STARTUP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # readiness probe of a child process
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            if httpx.get(url, timeout=1).is_success:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{url} not ready within {timeout}s")


#: The services the first case of the shipped stack's test runs each as its own process:
#: an annotator and the skill of a greeting's turn, from two of the folders `chorus run`
#: finds services in (annotators/, skills/). The others stay in the agent, as shipped (each
#: shipped service's module is also run in a fresh interpreter of its own, and answers
#: /health and /respond, in tests/deploy/test_compose.py's image checks): every service as
#: a process was 13 processes, most of the test's CPU; the six of a greeting's turn
#: (tokens, intents, badwords, rules, greeting, confidence) 13.5 s of CPU for this case.
GREETING_PATH = frozenset({"badwords", "greeting"})


def shipped_pipeline_file(tmp_path: Path, over_http: frozenset[str]) -> tuple[Path, list[int]]:
    """The shipped pipeline.json, and the ports of the services `chorus run` starts (the
    LLM skill stays off: no endpoint). ``over_http``: the services put on a free port, each
    as its own process, instead of in the agent where the file names its module. The
    shipped timeouts are a deployment's; a busy machine misses them, so the services get
    the tests' own."""
    shipped = json.loads(Path("pipeline.json").read_text())
    ports = []
    for group in shipped["services"].values():
        for name, service in group.items():
            connector = service["connector"]
            connector["timeout"] = SERVICE_TIMEOUT
            if name in over_http or "module" not in connector:
                port = free_port()
                connector.pop("module", None)
                connector["url"] = f"http://127.0.0.1:{port}/respond"
                if not service.get("requires_env"):
                    ports.append(port)
    shipped["turn_timeout"] = TURN_TIMEOUT
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps(shipped))
    return pipeline, ports


#: An LLM endpoint without LLM_MODEL: the llm skill is configured wrongly, not left off.
UNREACHABLE_LLM = "http://127.0.0.1:9/v1"


# The shipped stack, every service of it started: one at a time (another waits), so that in
# `make test`'s parallel run two of them do not starve each other of CPU
# (docs/development.md). The other tests here start one process or two, as many others do.
@pytest.mark.one_at_a_time("stack")
@pytest.mark.parametrize(
    ("stop_signal", "over_http"),
    [(signal.SIGINT, GREETING_PATH), (signal.SIGTERM, frozenset())],
    ids=["services-as-processes-sigint", "as-shipped-sigterm-misconfigured-llm"],
)
def test_run_starts_every_local_service_and_the_agent_then_stops_them(
    tmp_path: Path, stop_signal: signal.Signals, over_http: frozenset[str]
) -> None:
    """The whole shipped stack up, a greeting answered, the port of every service started
    as a process up (an annotator and the greeting skill, the others in the agent), then all
    down at the signal. As shipped (its services in the agent), the stack also runs with only
    LLM_BASE_URL set (no LLM_MODEL): it still comes up and answers, the llm skill's
    one-line reason is in the turn's errors, and nothing prints a traceback (one stack for
    both: starting the shipped one is most of either's time)."""
    pipeline, ports = shipped_pipeline_file(tmp_path, over_http)
    agent_port = free_port()
    unset = ("CHORUS_OPERATOR_KEY",)
    env = {
        **{k: v for k, v in os.environ.items() if k not in unset and not k.startswith("LLM_")},
        "CHORUS_PIPELINE": str(pipeline),
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
        **({} if over_http else {"LLM_BASE_URL": UNREACHABLE_LLM}),
    }
    process = subprocess.Popen(
        # What `make run` runs: the installed script, which finds the in-process services
        # from the folder it runs in.
        [str(CHORUS), "run", "--port", str(agent_port)],
        env=env,
        stdout=(printed := (tmp_path / "stdout").open("wb")),
        stderr=subprocess.PIPE,
    )
    printed.close()  # the child has its own copy
    base = f"http://127.0.0.1:{agent_port}"
    try:
        wait_for(f"{base}/ping", process)
        reply = httpx.post(
            f"{base}/", json={"user_id": "u", "payload": "hello"}, timeout=CLIENT_TIMEOUT
        ).json()
        assert reply["active_skill"] == "greeting"
        assert all(httpx.get(f"http://127.0.0.1:{p}/health").is_success for p in ports)
        if not over_http:
            # No rule decides about this one, so every skill runs, the llm skill included.
            question = {"user_id": "u", "payload": "What is 17 times 23?"}
            assert httpx.post(f"{base}/", json=question, timeout=CLIENT_TIMEOUT).json()["response"]
            (dialog,) = httpx.get(f"{base}/api/user/u", timeout=CLIENT_TIMEOUT).json()
            errors = {e["service"]: e for e in dialog["utterances"][2]["errors"]}
            assert "LLM_MODEL is required" in errors["llm"]["message"]
        # "Chorus agent on" is said once chorus run's own probe of /ping answers, which can
        # be after this test's did: waited for, not assumed.
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while b"Chorus agent on" not in (tmp_path / "stdout").read_bytes():
            assert time.monotonic() < deadline, "chorus run never said the agent is on"
            assert process.poll() is None, "chorus run exited"
            time.sleep(0.05)
    finally:
        process.send_signal(stop_signal)
        _, err = process.communicate(timeout=COMMAND_TIMEOUT)
    out = (tmp_path / "stdout").read_bytes()
    assert process.returncode == 0, err.decode()
    assert b"Chorus agent on" in out
    if over_http:
        assert b"llm                  off (requires_env: LLM_BASE_URL not set)" in out
    else:
        assert b"Traceback" not in out + err
        assert err.count(b"llm skill is misconfigured") == 1  # one line at start-up
        assert b"HTTP Request: GET" not in err  # chorus run's own probe of /ping is not logged
    # No operator key: the shipped handoff skill is off, and says why.
    assert b"handoff              off (requires_env: CHORUS_OPERATOR_KEY not set)" in out
    shown = b"badwords             " + (b"http://" if over_http else b"in the agent")
    assert shown in out
    for port in [*ports, agent_port]:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
        except httpx.TransportError:
            continue
        raise AssertionError(f"something still listens on {port} after Ctrl-C")


def test_run_refuses_a_bad_pipeline_naming_the_entry(tmp_path: Path) -> None:
    """The command in the test's process: a refusal at start-up is its output and exit
    code, before any service or server (the stack's own tests are the processes above)."""
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps({"services": {"skills": {"s": {"connector": {}}}}}))
    result = CliRunner().invoke(app, ["run"], env={"CHORUS_PIPELINE": str(pipeline)})
    assert result.exit_code == 2
    assert "services.skills.s.connector: missing url" in result.stderr


def stuck_stack(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`chorus run` of a pipeline whose one in-process service has a lifespan that never
    opens (beside one that answers); the process, its port, and the file the lifespan
    creates as it starts opening."""
    pipeline = tmp_path / "pipeline.json"
    skills = {
        "stuck": {"connector": {"module": "tests.support.in_process:stuck", "timeout": 2.0}},
        "echo": {"connector": {"module": "tests.support.in_process:make_echo", "timeout": 9.0}},
    }
    pipeline.write_text(json.dumps({"turn_timeout": TURN_TIMEOUT, "services": {"skills": skills}}))
    mark = tmp_path / "opening"
    port = free_port()
    env = {
        **os.environ,
        "CHORUS_PIPELINE": str(pipeline),
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
        in_process.STUCK_MARK: str(mark),
    }
    process = subprocess.Popen(
        [str(CHORUS), "run", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return process, port, mark


def test_sigterm_stops_an_agent_waiting_for_a_lifespan_that_never_opens(tmp_path: Path) -> None:
    """Before, SIGTERM and SIGINT (each twice) could not stop an agent whose in-process
    service's lifespan never opened, and ``chorus run`` had said the agent was on."""
    process, _, mark = stuck_stack(tmp_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not mark.exists():  # the agent is waiting for the lifespan
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the lifespan never started opening"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err.decode()
    assert b"Chorus agent on" not in out  # it never answered /ping


def test_run_says_the_agent_is_on_once_it_answers(tmp_path: Path) -> None:
    """The line "Chorus agent on" comes when /ping answers, not when the start began: the agent
    waits its 2 s for the stuck lifespan before it serves here, then answers without it."""
    process, port, _ = stuck_stack(tmp_path)
    lines: queue.Queue[bytes] = queue.Queue()
    assert process.stdout is not None

    def read() -> None:
        for line in process.stdout or []:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        while b"Chorus agent on" not in lines.get(timeout=STARTUP_TIMEOUT):
            pass
        assert httpx.get(f"http://127.0.0.1:{port}/ping", timeout=CLIENT_TIMEOUT).is_success
        reply = httpx.post(
            f"http://127.0.0.1:{port}/",
            json={"user_id": "u", "payload": "hello"},
            timeout=CLIENT_TIMEOUT,
        ).json()
        assert (reply["active_skill"], reply["response"]) == ("echo", "echo: hello")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=COMMAND_TIMEOUT)
    assert process.returncode == 0


#: A skill whose start-up lasts until the test lets it go (its gate file appears), as the
#: intents annotator's loading of its embeddings can last on a busy machine.
SLOW_SKILL = """
import os
import time
from pathlib import Path

from agent.sdk import Service

gate = Path(os.environ["SLOW_GATE"])
deadline = time.monotonic() + 600
while not gate.exists() and time.monotonic() < deadline:  # the test opens it
    time.sleep(0.05)

service = Service("slow", description="Starts when the test says so.")


@service.skill
def respond(dialog):
    return []


app = service.app
"""


#: `chorus run` as the installed script runs it, with :data:`agent.cli.stack.PATIENCE` (after
#: which a service not answering yet is said to be starting) at half a second instead of 10:
#: the test waits for that line, and the 10 seconds were most of its time. What is said,
#: and the wait after it, are the command's own, and so is stopping at Ctrl-C whatever
#: started the tests: a background job of a non-interactive shell (`make test &` in a
#: script, some CI runners) inherits SIGINT ignored, and `chorus run --services-only`, which
#: has no uvicorn of its own to catch it, once never saw the test's SIGINT: the test waited
#: its whole 180 s for the process to end. The command now sets Ctrl-C's handler itself.
CHORUS_WITH_SHORT_PATIENCE = (
    "from agent.cli import stack; stack.PATIENCE = 0.5; from agent.cli.main import app; app()"
)


def test_run_waits_for_a_service_that_is_still_starting(tmp_path: Path) -> None:
    """A service whose process runs but does not answer yet is listed as starting and
    waited for, not given up as "not running" while it would answer a moment later."""
    repo = tmp_path / "repo"
    (repo / "skills" / "slow").mkdir(parents=True)
    (repo / "skills" / "__init__.py").write_text("")
    (repo / "skills" / "slow" / "app.py").write_text(SLOW_SKILL)
    port = free_port()
    pipeline = tmp_path / "pipeline.json"
    slow = {"connector": {"url": f"http://127.0.0.1:{port}/respond"}}
    best = {"connector": {"builtin": "highest_confidence"}}
    pipeline.write_text(
        json.dumps({"services": {"skills": {"slow": slow}, "response_selectors": {"best": best}}})
    )
    gate = tmp_path / "gate"
    env = {**os.environ, "CHORUS_PIPELINE": str(pipeline), "SLOW_GATE": str(gate)}
    process = subprocess.Popen(
        [sys.executable, "-c", CHORUS_WITH_SHORT_PATIENCE, "run", "--services-only"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=(errors := (tmp_path / "stderr").open("wb")),
    )
    errors.close()  # the child has its own copy
    lines = stdout_lines(process)
    try:
        said = next_line(lines, ("slow ", "services are up"))
        assert said.startswith("  slow                 starting"), said
        gate.touch()
        said = next_line(lines, ("slow ", "services are up"))
        assert said == f"  slow                 http://127.0.0.1:{port}\n"
        assert next_line(lines, ("services are up",))
        assert httpx.get(f"http://127.0.0.1:{port}/health").is_success
    finally:
        gate.touch()
        process.send_signal(signal.SIGINT)
        # chorus run's own exit, not the end of its output, which a service it left running
        # would keep open; its stdout is read by the thread alone (communicate() read it
        # too). If it does not exit, the failure says what it still runs.
        left = left_running(process, COMMAND_TIMEOUT)
        with contextlib.suppress(queue.Empty):  # its output's end, then the pipe closed
            while lines.get(timeout=COMMAND_TIMEOUT) is not None:
                pass
        assert process.stdout is not None
        process.stdout.close()
    assert left is None, f"chorus run did not exit on SIGINT; its children: {left}"
    assert b"not running" not in (tmp_path / "stderr").read_bytes()


def left_running(process: subprocess.Popen[bytes], timeout: float) -> str | None:
    """``None`` once ``process`` exits within ``timeout``; else what it still runs (it and
    its children are then killed)."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        left = still_running(process.pid)
        for child in children(process.pid):
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        process.kill()
        process.wait()
        return left
    return None


def children(pid: int) -> list[int]:
    listed = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in listed.read_text().split()] if listed.exists() else []


def still_running(pid: int) -> str:
    """``pid``'s child processes, with their commands: what a hang left running."""
    commands = []
    for child in children(pid):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
            commands.append(f"{child}: {command.decode(errors='replace')}")
    return "; ".join(commands) or "no child processes"


def stdout_lines(process: subprocess.Popen[bytes]) -> queue.Queue[str | None]:
    """The process's output lines as they come (``None`` at its end), read by a thread so
    that a wait for one is bounded."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.decode())
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def next_line(lines: queue.Queue[str | None], starts: tuple[str, ...]) -> str:
    """The next line that has one of ``starts`` (after its indent)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
        assert line is not None, f"the output ended before a line with {starts}"
        if line.lstrip().startswith(starts):
            return line
