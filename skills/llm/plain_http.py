"""A lean HTTP/1.1 client for the LLM skill's streamed requests to a plain ``http://``
endpoint (a vLLM, Ollama or llama.cpp server on the machine or the local network).

Why not httpx there: between the skill's request and its bytes on the socket, httpx's
client and pool (its request and auth flows, its pool's locks and turns of the loop), and
then its decoders for each streamed line, take the agent's event loop for longer than the
request itself, on the way to the user's first token (docs/performance.md, "The first
token, hop by hop"). Here a request is written in the caller's own step when a kept
connection is idle, and the answer is parsed with h11 (httpcore's parser) straight from
the socket.

What it does: one request at a time on a connection; connections kept open after an answer
read to its end (and left when the server closes them, or when an answer is not read to its
end); a connect, and each read, bounded by ``timeout``. What it leaves to httpx (the skill
uses httpx for those endpoints): TLS (``https://``), proxies, and whole completions
(``LLM_STREAM=false``).
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import h11

#: Bytes asked of the socket at a time.
READ_BYTES = 65536
#: Idle connections kept at most, as httpx's pool keeps 20: more are closed.
KEPT = 20


class PlainHttpError(Exception):
    """The request failed on its way: ``kind`` names how, as httpx names it (``ConnectError``,
    ``ReadError``, ``RemoteProtocolError``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class PlainTimeout(Exception):
    """A connect or a read took longer than the client's ``timeout``."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the requests go: ``http://host:port/target``."""

    host: str
    port: int
    target: str

    @property
    def authority(self) -> str:
        return self.host if self.port == 80 else f"{self.host}:{self.port}"


class _Connection:
    """One socket and its HTTP/1.1 state."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.CLIENT)

    def close(self) -> None:
        self.writer.close()

    def reusable(self) -> bool:
        """Still open, and nothing waiting on it: a kept connection the server has closed
        (its keep-alive ran out) reads as ready, with its end or nothing."""
        if self.writer.is_closing() or self.reader.at_eof():
            return False
        sock = self.writer.get_extra_info("socket")  # asyncio's TransportSocket
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable


class Answer:
    """An answer being read: its status and content type, then its body as lines or whole."""

    def __init__(self, connection: _Connection, response: h11.Response, timeout: float) -> None:
        self.status = response.status_code
        self.content_type = ""
        for name, value in response.headers:
            if name == b"content-type":
                self.content_type = value.decode("latin-1")
        self._connection = connection
        self._timeout = timeout
        #: whether the body was read to its end (the connection may then serve again)
        self.complete = False

    async def _pieces(self) -> AsyncIterator[bytes]:
        """The body's bytes as they come."""
        http = self._connection.http
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await _read(self._connection, self._timeout))
                continue
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.complete = True
                return
            else:  # ConnectionClosed before the body's end
                raise PlainHttpError(
                    "RemoteProtocolError", "peer closed connection without sending complete body"
                )

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([piece async for piece in self._guarded()])

    async def lines(self) -> AsyncIterator[str]:
        """The body's lines (a line ends with ``\\n``, ``\\r\\n`` or ``\\r``), without
        their ends; a last line without one is given too."""
        rest = b""
        async for piece in self._guarded():
            rest += piece
            if b"\r" in rest:
                rest = rest.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            *whole, rest = rest.split(b"\n")
            for line in whole:
                yield line.decode("utf-8", "replace")
        if rest:
            yield rest.decode("utf-8", "replace")

    async def _guarded(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._pieces():
                yield piece
        except h11.RemoteProtocolError as exc:
            raise PlainHttpError("RemoteProtocolError", str(exc)) from None


async def _read(connection: _Connection, seconds: float) -> bytes:
    """The next bytes from the socket; ``b""`` at its end."""
    try:
        async with asyncio.timeout(seconds):
            return await connection.reader.read(READ_BYTES)
    except TimeoutError:
        raise PlainTimeout(f"no bytes within {seconds:g}s") from None
    except OSError as exc:
        raise PlainHttpError("ReadError", str(exc) or type(exc).__name__) from None


class PlainHttp:
    """Requests to one plain-http endpoint over kept connections (module docstring)."""

    def __init__(self, endpoint: Endpoint, headers: list[tuple[str, str]], timeout: float) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._headers = [
            ("Host", endpoint.authority),
            ("Accept", "*/*"),
            ("Accept-Encoding", "identity"),
            ("Content-Type", "application/json"),
            *headers,
        ]
        self._idle: list[_Connection] = []

    async def _connection(self) -> _Connection:
        """A kept connection that is still good, else a new one."""
        while self._idle:
            kept = self._idle.pop()
            if kept.reusable():
                return kept
            kept.close()
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(
                    self.endpoint.host, self.endpoint.port
                )
        except TimeoutError:
            raise PlainTimeout(f"no connection within {self.timeout:g}s") from None
        except OSError as exc:
            raise PlainHttpError("ConnectError", str(exc) or type(exc).__name__) from None
        return _Connection(reader, writer)

    @asynccontextmanager
    async def post(self, body: bytes) -> AsyncIterator[Answer]:
        """POST ``body`` (JSON); the answer once its head is read. Its connection is kept
        for the next request when the block has read the answer to its end, else closed."""
        connection = await self._connection()
        kept = False
        try:
            http = connection.http
            request = h11.Request(
                method="POST",
                target=self.endpoint.target,
                headers=[*self._headers, ("Content-Length", str(len(body)))],
            )
            connection.writer.write(
                b"".join(
                    (
                        http.send(request) or b"",
                        http.send(h11.Data(data=body)) or b"",
                        http.send(h11.EndOfMessage()) or b"",
                    )
                )
            )
            answer = Answer(connection, await _head(connection, self.timeout), self.timeout)
            yield answer
            done = http.our_state is h11.DONE and http.their_state is h11.DONE
            if answer.complete and done and len(self._idle) < KEPT:
                http.start_next_cycle()
                self._idle.append(connection)
                kept = True
        finally:
            if not kept:
                connection.close()

    def close(self) -> None:
        """Close the kept connections."""
        for connection in self._idle:
            connection.close()
        self._idle.clear()


async def _head(connection: _Connection, seconds: float) -> h11.Response:
    """The answer's status line and headers (a ``100 Continue`` skipped)."""
    http = connection.http
    try:
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await _read(connection, seconds))
            elif isinstance(event, h11.Response):
                return event
            elif isinstance(event, h11.ConnectionClosed):
                raise PlainHttpError(
                    "RemoteProtocolError", "Server disconnected without sending a response."
                )
    except h11.RemoteProtocolError as exc:
        raise PlainHttpError("RemoteProtocolError", str(exc)) from None
