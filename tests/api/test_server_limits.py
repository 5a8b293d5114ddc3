"""The served agent's HTTP limits (``python -m agent.api.serve``, as the image and ``chorus
run`` serve it): a request header too large (431), headers that never finish (408), and more
connections than the cap (503). Real sockets against the real server; each limit is set
small through its environment variable, or, for the server's constants, in the served
process (``served_agent``'s ``constants``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from agent.api.serve import RESERVED_DESCRIPTORS
from agent.sdk import DialogView, Service, SkillHypothesis
from tests.api.test_crash_recovery import write_pipeline
from tests.conftest import service_entry
from tests.support.processes import COMMAND_TIMEOUT, served_agent
from tests.support.servers import ServerThread

KEY = "s3cret-key-for-tests-0123"

PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
#: How long a test waits for the agent to answer or close, before it fails: only a bound
#: on a wait for the event itself, so far above what a busy machine takes (under the
#: suite's 300 s per-test timeout).
PATIENCE = 240.0
#: A header timeout no test here reaches while it waits (the crowded cap's 1 s must be
#: what closes a half-sent request, never this).
NEVER_REACHED = PATIENCE + 60


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


def first_to_speak(socks: list[socket.socket]) -> socket.socket:
    """The first of ``socks`` the agent sends something to (or closes); fails if none
    within :data:`PATIENCE` seconds. Which of several held connections the agent closes
    depends on when it read each one's bytes, which a busy machine decides."""
    ready, _, _ = select.select(socks, [], [], PATIENCE)
    assert ready, f"none of {len(socks)} connections answered in {PATIENCE} s"
    return ready[0]


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
    with served_agent(agent_env(tmp_path)) as (port, agent):
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/ping", headers={"X-Pad": "a" * 60_000}).status_code == 200
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
            "message": "request line and headers are over the 65536 bytes limit "
            "(MAX_HEADER_BYTES): send fewer or smaller headers (cookies, tokens) "
            "or a shorter URL",
            "fields": [],
        }
        assert peak - before < 10_000, f"a 20 MB header grew the agent by {peak - before} KiB"
        assert httpx.get(f"{base}/ping").status_code == 200


def test_headers_trickling_in_are_cut_off_at_the_header_timeout(tmp_path: Path) -> None:
    with served_agent(agent_env(tmp_path), constants={"HEADER_TIMEOUT": 1.0}) as (port, _):
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
            "message": "request headers were not complete within 1 s (HEADER_TIMEOUT)",
            "fields": [],
        }


def gated_skill(gate: threading.Event, arrived: threading.Semaphore) -> FastAPI:
    """Answers each call once ``gate`` is set; releases ``arrived`` as each call comes in."""
    service = Service("gated")

    @service.skill
    async def answer(dialog: DialogView) -> SkillHypothesis:
        arrived.release()
        await asyncio.to_thread(gate.wait, 60)
        return SkillHypothesis(text="at last", confidence=0.9)

    return service.app


def turn_request(user: str) -> bytes:
    body = json.dumps({"user_id": user, "payload": "Hello"}).encode()
    return (
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def test_connections_past_the_cap_get_503_while_those_open_are_served(
    services: Callable[[FastAPI], ServerThread], tmp_path: Path
) -> None:
    """Five users wait for their turns' answers (a skill holds them): a sixth and a
    seventh connection get 503, the five are answered, and a new one is served once two
    have left."""
    log = tmp_path / "agent.log"
    gate, arrived = threading.Event(), threading.Semaphore(0)
    skill = services(gated_skill(gate, arrived))
    env = {
        **agent_env(tmp_path, CHORUS_MAX_CONNECTIONS="5"),
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "gated.json", {"gated": service_entry(skill.url, timeout=60)}
        ),
    }
    with served_agent(env, stderr=log, constants={"HEADER_TIMEOUT": NEVER_REACHED}) as (port, _):
        held: list[socket.socket] = []
        try:
            for user in range(5):
                sock = socket.create_connection(("127.0.0.1", port))
                held.append(sock)
                sock.sendall(turn_request(f"user-{user}"))
            for _ in range(5):
                assert arrived.acquire(timeout=PATIENCE), "the turns did not reach the skill"
            for _ in range(2):
                with socket.create_connection(("127.0.0.1", port)) as extra:
                    extra.sendall(PING)
                    refused = until_closed(extra)
                assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
                assert b"\r\nretry-after: 1\r\n" in refused
                assert refused.endswith(
                    b'"message": "too many open connections; try again shortly", "fields": []}'
                )
            gate.set()  # the users already connected get their answers
            for sock in held:
                assert one_answer(sock).startswith(b"HTTP/1.1 200 ")
            for sock in held[:2]:
                sock.close()
            deadline = time.monotonic() + PATIENCE
            while httpx.get(f"http://127.0.0.1:{port}/ping").status_code != 200:
                assert time.monotonic() < deadline, f"no new connection served in {PATIENCE} s"
                time.sleep(0.05)  # the agent sees the two closes in its own time
        finally:
            gate.set()
            for sock in held:
                sock.close()
    warnings = [line for line in log.read_text().splitlines() if "CHORUS_MAX_CONNECTIONS" in line]
    assert len(warnings) == 1, warnings  # two refused, one line (at most one a minute)
    assert "WARNING" in warnings[0] and "5 connections open" in warnings[0]


def test_at_the_cap_half_sent_requests_make_way_for_new_clients_long_before_the_timeout(
    tmp_path: Path,
) -> None:
    """Five connections that never finish their headers hold the whole cap; a new client
    is served once they have waited a second (not the header timeout, which the test never
    reaches), and the one closed for it is told why."""
    env = agent_env(tmp_path, CHORUS_MAX_CONNECTIONS="5")
    with served_agent(env, constants={"HEADER_TIMEOUT": NEVER_REACHED}) as (port, _):
        held: list[socket.socket] = []
        try:
            for _ in range(5):
                sock = socket.create_connection(("127.0.0.1", port))
                held.append(sock)
                sock.sendall(PING)
                assert one_answer(sock).startswith(b"HTTP/1.1 200 ")  # it holds a place
                sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # never finished
            deadline = time.monotonic() + PATIENCE
            while (status := ping_status(port)) != 200:
                assert status == 503, status
                assert time.monotonic() < deadline, f"new clients refused for {PATIENCE} s"
                time.sleep(0.05)  # polled: the held requests must first wait their grace
            answer = until_closed(first_to_speak(held))  # the one that made way for it
        finally:
            for sock in held:
                sock.close()
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["message"] == (
        "request headers were not complete within 1 s while the agent was at its "
        "connection limit (CHORUS_MAX_CONNECTIONS)"
    )


def ping_status(port: int) -> int:
    """The status a new connection's ``/ping`` gets (503 or 200; 0 when it was closed
    unanswered, as a flood of refusals is)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(PING)
        try:
            answer = one_answer(sock)
        except (AssertionError, ConnectionResetError):
            return 0
    return int(answer.split(b" ", 2)[1])


UPGRADE = (
    b"GET /chat/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def upgraded(port: int) -> tuple[socket.socket, int]:
    """A new connection asking for ``/chat/ws``, and the status of the answer (101: it is
    a WebSocket now, left idle; otherwise the answer was read and the agent closed it)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(UPGRADE)
    sock.settimeout(10)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {head!r}"
        head += chunk
    status = int(head.split(b" ", 2)[1])
    if status != 101:
        until_closed(sock)
    return sock, status


def test_idle_websockets_hold_only_their_share_of_the_cap(tmp_path: Path) -> None:
    """At ``ulimit -n`` 1024 the cap is 572 connections: of 600 WebSockets opened and left
    idle, half the cap is upgraded and the rest get 503, and new HTTP clients are served."""
    cap = 1024 - RESERVED_DESCRIPTORS
    with served_agent(agent_env(tmp_path), open_files=1024) as (port, _):
        sockets: list[socket.socket] = []
        statuses: Counter[int] = Counter()
        try:
            for _ in range(600):
                sock, status = upgraded(port)
                statuses[status] += 1
                if status == 101:
                    sockets.append(sock)
                else:
                    sock.close()
            assert statuses == {101: cap // 2, 503: 600 - cap // 2}
            assert [ping_status(port) for _ in range(20)] == [200] * 20
        finally:
            for sock in sockets:
                sock.close()


def test_a_websocket_past_its_share_is_told_why(tmp_path: Path) -> None:
    """WebSockets may hold half the cap: two of five connections."""
    env = agent_env(tmp_path, CHORUS_MAX_CONNECTIONS="5")
    with served_agent(env) as (port, _):
        url = f"ws://127.0.0.1:{port}/chat/ws"
        with connect(url, open_timeout=10), connect(url, open_timeout=10):
            with pytest.raises(InvalidStatus) as refused:
                connect(url, open_timeout=10)
            assert httpx.get(f"http://127.0.0.1:{port}/ping").status_code == 200
    response = refused.value.response
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert json.loads(response.body)["message"] == (
        "2 WebSockets are open, the most this agent keeps (half of CHORUS_MAX_CONNECTIONS); "
        "try again shortly"
    )


def test_an_idle_websocket_is_closed_though_it_answers_pings(tmp_path: Path) -> None:
    """A chat socket that only answers pings is closed after the idle timeout; the load
    socket, whose page sends nothing but is sent the load every 0.5 s, is not idle."""
    with (
        served_agent(agent_env(tmp_path), constants={"WEBSOCKET_IDLE_TIMEOUT": 1.0}) as (port, _),
        connect(f"ws://127.0.0.1:{port}/debug/current_load/ws", open_timeout=10) as load,
    ):
        with (
            connect(f"ws://127.0.0.1:{port}/chat/ws", open_timeout=10, ping_interval=0.2) as ws,
            pytest.raises(ConnectionClosed) as closed,
        ):
            ws.recv(timeout=PATIENCE)
        assert json.loads(load.recv(timeout=PATIENCE))["current_load"] == {"agent": 0}
        with contextlib.suppress(TimeoutError):
            while True:  # the rest of what it was sent while the chat socket idled
                load.recv(timeout=0)
        assert load.ping().wait(10), "the load socket was closed too"
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (
        1001,
        "no message for 1 s (WEBSOCKET_IDLE_TIMEOUT)",
    )


def test_a_websocket_message_over_the_body_limit_closes_the_socket_with_1009(
    tmp_path: Path,
) -> None:
    env = agent_env(tmp_path, CHORUS_MAX_BODY_BYTES="10000")
    big = json.dumps({"user_id": "u", "payload": "hi", "pad": "a" * 20_000})
    with served_agent(env) as (port, _):
        with connect(f"ws://127.0.0.1:{port}/chat/ws", open_timeout=10) as ws:
            ws.send(big)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=PATIENCE)
        over_http = httpx.post(
            f"http://127.0.0.1:{port}/", content=big, headers={"Content-Type": "application/json"}
        )
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert over_http.status_code == 413  # the same bound as an HTTP body's


def test_the_api_key_in_a_url_is_not_written_to_the_log(tmp_path: Path) -> None:
    """A browser cannot set headers on a WebSocket, so the key may come as ``?api_key=``;
    the server's access lines show the path without it."""
    log = tmp_path / "agent.log"
    env = agent_env(tmp_path, CHORUS_API_KEY=KEY, CHORUS_PROTECT_CHAT="true")
    with served_agent(env, stderr=log, log_level="info") as (port, agent):
        base = f"127.0.0.1:{port}"
        with connect(f"ws://{base}/chat/ws?events=true&api_key={KEY}", open_timeout=10):
            pass
        with connect(
            f"ws://{base}/debug/current_load/ws?api_key={KEY}",
            additional_headers={"X-API-Key": KEY},
            open_timeout=10,
        ) as ws:
            ws.recv(timeout=PATIENCE)
        assert httpx.get(f"http://{base}/ping?api_key={KEY}").status_code == 200
        agent.terminate()  # its log is whole once it has stopped
        agent.wait(30)
    text = log.read_text()
    assert KEY not in text
    assert '"WebSocket /chat/ws?events=true&api_key=[redacted]" [accepted]' in text
    assert '"WebSocket /debug/current_load/ws?api_key=[redacted]" [accepted]' in text
    assert '"GET /ping?api_key=[redacted] HTTP/1.1" 200' in text


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
    ("variable", "value", "said"),
    [
        ("CHORUS_MAX_CONNECTIONS", "0", "CHORUS_MAX_CONNECTIONS: "),
        (
            "CHORUS_HEADER_TIMEOUT",
            "30",
            "CHORUS_HEADER_TIMEOUT is no longer read: a constant now (HEADER_TIMEOUT in "
            "agent/api/serve.py, 10 s): unset it",
        ),
    ],
)
def test_a_bad_or_removed_limit_stops_the_server_naming_it(
    tmp_path: Path, variable: str, value: str, said: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent.api.serve", "--port", "9"],
        env={**os.environ, **agent_env(tmp_path, **{variable: value})},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert result.returncode != 0
    assert f"error: bad settings: {said}" in result.stderr
