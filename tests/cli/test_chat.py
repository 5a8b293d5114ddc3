"""`chorus chat` against a real agent, with piped input as a script would give it.

The command runs in the test's process (typer's runner, its input piped, its output and
exit code read): what these tests check is the chat's own lines and codes, and a process
each would import the agent again for nothing they look at. A streamed answer is read from
a real ``chorus chat`` process, as it is written to its pipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from agent.api.app import create_app
from agent.cli.main import app
from agent.settings import Settings
from skills.fallback.app import app as fallback
from skills.greeting.app import app as greeting
from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT
from tests.support.servers import serving
from tests.support.services import gated_story

API_KEY = "chat-test-key-0123456789"


def pipeline(greeting_url: str, fallback_url: str) -> dict[str, Any]:
    return {
        "services": {
            "skills": {
                "greeting": {"connector": {"url": f"{greeting_url}/respond"}},
                "fallback": {"connector": {"url": f"{fallback_url}/respond"}},
            },
            "response_selectors": {"best": {"connector": {"builtin": "highest_confidence"}}},
        }
    }


def start_agent(tmp_path: Path, **settings: Any) -> Iterator[str]:
    with serving(greeting) as greet, serving(fallback) as last:
        path = tmp_path / "pipeline.json"
        path.write_text(json.dumps(pipeline(greet.url, last.url)))
        app = create_app(
            Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=path, **settings)
        )
        with serving(app) as agent:
            yield agent.url


@pytest.fixture
def agent_url(tmp_path: Path) -> Iterator[str]:
    yield from start_agent(tmp_path)


@pytest.fixture
def protected_agent_url(tmp_path: Path) -> Iterator[str]:
    yield from start_agent(tmp_path, api_key=API_KEY, protect_chat=True)


def chat(*args: str, typed: str, cwd: Path | None = None, **env: str) -> Result:
    """``chorus chat ARGS`` with ``typed`` piped in, in ``cwd``: plain text, and no agent
    setting but ``env``'s."""
    unset: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("CHORUS_", "TTY_")) or k == "FORCE_COLOR"
    }
    with pytest.MonkeyPatch.context() as patch:
        if cwd is not None:
            patch.chdir(cwd)
        return CliRunner().invoke(app, ["chat", *args], input=typed, env={**unset, **env})


def test_answers_show_the_skill_and_new_starts_another_dialog(agent_url: str) -> None:
    result = chat(
        "--url", agent_url, "--user-id", "ann", typed="Hello!\nAnn\n\n/new\nhi\n/quit\nnever sent\n"
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 6, result.stdout
    assert lines[1].startswith("bot [greeting]: ") and "name" in lines[1]
    assert lines[2].startswith("bot [greeting]: ") and "Ann" in lines[2]
    assert lines[3] == "(your next message starts a new dialog)"
    assert lines[5].startswith("bot [greeting]: ") and "Ann" in lines[5], (
        "a new dialog, the same user: the name is remembered"
    )
    first, second = lines[0], lines[4]
    assert first.startswith("-- dialog ") and second.startswith("-- dialog ")
    assert first != second

    dialogs = httpx.get(f"{agent_url}/api/user/ann").json()
    texts = [[u["text"] for u in d["utterances"]] for d in dialogs]
    assert [t[0::2] for t in texts] == [["Hello!", "Ann"], ["hi"]], "nothing after /quit"
    assert [d["dialog_id"] for d in dialogs] == [first.split()[2], second.split()[2]]


def test_without_url_it_talks_to_the_agent_chorus_run_serves_here(
    agent_url: str, tmp_path: Path
) -> None:
    """`chorus run` records where it serves the agent in data/chorus-run.json, whatever
    --port moved it to (the newcomer's path in tests/cli/test_scaffold.py runs both), and
    `chorus chat` run in the same folder talks to it; a record whose process is gone (a
    run that was killed) is not believed."""
    folder = tmp_path / "checkout"
    (folder / "data").mkdir(parents=True)
    record = folder / "data" / "chorus-run.json"
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=COMMAND_TIMEOUT,
    )
    record.write_text(json.dumps({"url": agent_url, "pid": int(ended.stdout)}))
    chat("--user-id", "killed", typed="hello\n", cwd=folder)
    assert httpx.get(f"{agent_url}/api/user/killed").status_code == 404, "not this agent"

    record.write_text(json.dumps({"url": agent_url, "pid": os.getpid()}))  # a live run
    found = chat("--user-id", "ann", typed="hello\n", cwd=folder)
    assert found.exit_code == 0, found.stderr
    assert "bot [greeting]:" in found.stdout
    assert httpx.get(f"{agent_url}/api/user/ann").json(), "the message reached this agent"


def test_end_of_input_ends_the_chat(agent_url: str) -> None:
    result = chat("--url", agent_url, typed="tell me about trains")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("bot [fallback]: ")
    assert result.stderr == ""


def test_unreachable_agent_is_one_line_and_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = chat("--url", url, typed="hello\n")
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the agent at {url}")
    assert "make run" in line


def test_protected_chat_needs_the_key(protected_agent_url: str) -> None:
    refused = chat("--url", protected_agent_url, typed="hello\n")
    assert refused.exit_code == 1
    assert "refused the chat (401)" in refused.stderr and "Traceback" not in refused.stderr
    allowed = chat("--url", protected_agent_url, typed="hello\n", CHORUS_API_KEY=API_KEY)
    assert allowed.exit_code == 0, allowed.stderr
    assert allowed.stdout.splitlines()[1].startswith("bot [greeting]: ")


def test_a_streamed_answer_is_printed_as_it_is_written(tmp_path: Path) -> None:
    """The story skill writes "Once upon " and waits: the chat shows those words while the
    answer is still unwritten, then the rest once the skill goes on."""
    gate = threading.Event()
    with serving(gated_story(gate)) as story:
        path = tmp_path / "pipeline.json"
        skill = {"connector": {"url": f"{story.url}/respond", "timeout": 60}, "stream": True}
        path.write_text(json.dumps({"services": {"skills": {"story": skill}}}))
        app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=path))
        with (
            serving(app) as agent,
            subprocess.Popen(
                [sys.executable, "-m", "agent.cli.main", "chat", "--url", agent.url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={k: v for k, v in os.environ.items() if not k.startswith("CHORUS_")},
            ) as process,
        ):
            try:
                assert process.stdin and process.stdout and process.stderr
                process.stdin.write(b"Tell me a story\n")
                process.stdin.close()
                shown = b""
                while b"Once upon " not in shown:
                    piece = os.read(process.stdout.fileno(), 1024)
                    assert piece, f"the chat ended before the story: {shown!r}"
                    shown += piece
                assert b"a time." not in shown and process.poll() is None
                gate.set()
                rest, problems = process.stdout.read(), process.stderr.read()
                assert process.wait(timeout=60) == 0, problems
            finally:
                gate.set()
                if process.poll() is None:
                    process.kill()
    lines = (shown + rest).decode().splitlines()
    assert lines[1:] == ["bot [story]: Once upon a time."], (lines, problems)
