"""The served agent's HTTP limits (``python -m agent.api.serve``, as the image and ``chorus
run`` serve it): a request header too large (431), headers that never finish (408), and more
connections than the cap (503). Real sockets against the real server; each limit is set
small through its environment variable."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agent.api.serve import RESERVED_DESCRIPTORS
from tests.api.test_crash_recovery import write_pipeline
from tests.conftest import service_entry
from tests.support.processes import COMMAND_TIMEOUT, served_agent

PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
#: How long a test waits for the agent to answer or close, before it fails: only a bound
#: on a wait for the event itself, so far above what a busy machine takes.
PATIENCE = 60.0


def agent_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """An agent on SQLite whose one skill is never called (only /ping is asked)."""
    return {
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "pipeline.json", {"echo": service_entry("http://127.0.0.1:9")}
        ),
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
        **settings,
    }


def until_closed(sock: socket.socket, timeout: float = PATIENCE) -> bytes:
    """Everything the agent sends until it closes the connection; fails if it does not
    within ``timeout`` seconds."""
    received = b""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"still open after {timeout} s; got {received[:80]!r}"
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return received
        received += chunk


def one_answer(sock: socket.socket) -> bytes:
    """One whole response (its head and a Content-Length body) on a kept-alive connection."""
    sock.settimeout(PATIENCE)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {received!r}"
        received += chunk
    head, body = received.split(b"\r\n\r\n", 1)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head


def peak_rss_kib(pid: int) -> tuple[int, int]:
    """The process's resident memory now and at its peak (``VmRSS``, ``VmHWM``), in KiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def test_a_header_over_the_limit_gets_431_without_being_read_or_stalling_others(
    tmp_path: Path,
) -> None:
    with served_agent(agent_env(tmp_path, CHORUS_MAX_HEADER_BYTES="4096")) as (port, agent):
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/ping", headers={"X-Pad": "a" * 3500}).status_code == 200
        before, _ = peak_rss_kib(agent.pid)
        with socket.create_connection(("127.0.0.1", port)) as big:
            big.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000_000)
            # Its header never ends; another client is answered meanwhile.
            assert httpx.get(f"{base}/ping", timeout=PATIENCE).status_code == 200
            answer = until_closed(big)
        _, peak = peak_rss_kib(agent.pid)
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
            "error": "request_header_fields_too_large",
            "message": "request line and headers are over the 4096 bytes limit "
            "(CHORUS_MAX_HEADER_BYTES): send fewer or smaller headers (cookies, tokens) "
            "or a shorter URL",
            "fields": [],
        }
        assert peak - before < 10_000, f"a 20 MB header grew the agent by {peak - before} KiB"
        assert httpx.get(f"{base}/ping").status_code == 200


def test_headers_trickling_in_are_cut_off_at_the_header_timeout(tmp_path: Path) -> None:
    with served_agent(agent_env(tmp_path, CHORUS_HEADER_TIMEOUT="1")) as (port, _):
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")
            received, trickled = b"", 0
            deadline = time.monotonic() + PATIENCE
            while True:
                assert time.monotonic() < deadline, f"still open after {PATIENCE} s of trickling"
                readable, _, _ = select.select([slow], [], [], 0.2)
                if not readable:
                    slow.sendall(b"x")  # one more byte of a header name, every 0.2 s
                    trickled += 1
                    continue
                chunk = slow.recv(65536)
                if not chunk:
                    break
                received += chunk
        assert trickled >= 2, "the headers did not trickle"
        assert received.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert json.loads(received.split(b"\r\n\r\n", 1)[1]) == {
            "error": "request_timeout",
            "message": "request headers were not complete within 1 s (CHORUS_HEADER_TIMEOUT)",
            "fields": [],
        }


def test_connections_past_the_cap_get_503_while_those_open_are_served(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    env = agent_env(tmp_path, CHORUS_MAX_CONNECTIONS="5", CHORUS_HEADER_TIMEOUT="30")
    with served_agent(env, stderr=log) as (port, _):
        held: list[socket.socket] = []
        try:
            for _ in range(5):
                sock = socket.create_connection(("127.0.0.1", port))
                held.append(sock)
                sock.sendall(PING)
                assert one_answer(sock).startswith(b"HTTP/1.1 200 ")
                sock.sendall(b"GET /ping HTTP/1.1\r\n")  # the next request, left unfinished
            for _ in range(2):
                with socket.create_connection(("127.0.0.1", port)) as extra:
                    extra.sendall(PING)
                    refused = until_closed(extra)
                assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
                assert b"\r\nretry-after: 1\r\n" in refused
                assert refused.endswith(
                    b'"message": "too many open connections; try again shortly", "fields": []}'
                )
            held[0].sendall(b"Host: x\r\n\r\n")  # a user already connected finishes a request
            assert one_answer(held[0]).startswith(b"HTTP/1.1 200 ")
            for sock in held[:2]:
                sock.close()
            deadline = time.monotonic() + PATIENCE
            while httpx.get(f"http://127.0.0.1:{port}/ping").status_code != 200:
                assert time.monotonic() < deadline, f"no new connection served in {PATIENCE} s"
                time.sleep(0.05)  # the agent sees the two closes in its own time
        finally:
            for sock in held:
                sock.close()
    warnings = [line for line in log.read_text().splitlines() if "CHORUS_MAX_CONNECTIONS" in line]
    assert len(warnings) == 1, warnings  # two refused, one line (at most one a minute)
    assert "WARNING" in warnings[0] and "5 connections open" in warnings[0]


def test_the_default_cap_leaves_room_under_the_open_file_limit(tmp_path: Path) -> None:
    """At ``ulimit -n`` 480, the agent takes 480 - 452 = 28 connections, the rest of its
    descriptors kept for its database, services and files; the 29th gets 503."""
    cap = 480 - RESERVED_DESCRIPTORS
    with served_agent(agent_env(tmp_path), open_files=480) as (port, _):
        held: list[socket.socket] = []
        try:
            for _ in range(cap):
                sock = socket.create_connection(("127.0.0.1", port))
                held.append(sock)
                sock.sendall(PING)
                assert one_answer(sock).startswith(b"HTTP/1.1 200 ")
            with socket.create_connection(("127.0.0.1", port)) as extra:
                extra.sendall(PING)
                assert until_closed(extra).startswith(b"HTTP/1.1 503 ")
        finally:
            for sock in held:
                sock.close()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CHORUS_MAX_HEADER_BYTES", "100"),
        ("CHORUS_HEADER_TIMEOUT", "0"),
        ("CHORUS_MAX_CONNECTIONS", "0"),
    ],
)
def test_a_bad_limit_stops_the_server_naming_it(tmp_path: Path, variable: str, value: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent.api.serve", "--port", "9"],
        env={**os.environ, **agent_env(tmp_path, **{variable: value})},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert result.returncode != 0
    assert f"error: bad settings: {variable}: " in result.stderr
