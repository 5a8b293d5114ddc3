"""The served agent writes a response's head with its body (``agent/api/corked.py``): each
response still arrives whole and in order, and a streamed one's head does not wait for its
first event. Real sockets against uvicorn serving with the agent's HTTP protocol."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from agent.api.connection_limits import ServerLimits, limited_http
from tests.support.servers import ServerThread

#: How long a read waits for the server, at most: only a bound on a wait for the event.
PATIENCE = 120.0


def app(first_event: threading.Event) -> FastAPI:
    made = FastAPI()

    @made.get("/echo/{word}")
    async def echo(word: str) -> dict[str, str]:
        return {"word": word}

    @made.get("/stream")
    async def stream() -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            await asyncio.to_thread(first_event.wait, PATIENCE)
            yield b"data: one\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return made


@contextmanager
def served(first_event: threading.Event) -> Iterator[int]:
    server = ServerThread(app(first_event))
    server.server.config.http = limited_http(
        ServerLimits(
            max_header_bytes=65536,
            header_timeout=PATIENCE,
            max_connections=100,
            max_websockets=10,
            websocket_idle_timeout=PATIENCE,
            max_message_bytes=65536,
        )
    )
    server.start()
    try:
        yield server.port
    finally:
        server.stop()


def read_until(sock: socket.socket, marker: bytes, count: int = 1) -> bytes:
    received = b""
    while received.count(marker) < count:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {received!r}"
        received += chunk
    return received


def test_responses_on_one_connection_arrive_whole_and_in_order() -> None:
    with served(threading.Event()) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(PATIENCE)
        for word in ("first", "second", "third"):
            sock.sendall(f"GET /echo/{word} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            answer = read_until(sock, b"}")
            head, body = answer.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 200 OK")
            assert body == f'{{"word":"{word}"}}'.encode()
        sock.sendall(b"GET /echo/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        assert received.endswith(b'\r\n\r\n{"word":"last"}')


def test_a_streamed_response_s_head_comes_before_its_first_event() -> None:
    first_event = threading.Event()
    with served(first_event) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(PATIENCE)
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        head = read_until(sock, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert b"text/event-stream" in head
        first_event.set()
        assert b"data: one" in read_until(sock, b"data: one")
