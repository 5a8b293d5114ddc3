"""The agent's service calls as plain HTTP/1.1 over kept-alive connections.

A turn makes about 7 service calls, and each went through ``aiohttp.ClientSession``: its
request object, cookie jar, redirect loop, trace hooks and timer classes cost about
twice the call's own work (the write, the read, the parse) in the agent's CPU profile
(docs/performance.md, "Where the time goes"). The connectors need none of that: one POST
to a URL of the pipeline file, a bounded answer read whole or line by line. So
:class:`WireTransport` writes the request itself and parses the answer with httptools,
the C parser uvicorn already serves the agent with, on a pool of connections kept per
host and port.

What it keeps from aiohttp's behaviour, the connectors rely on: a refused connection
raises ``ConnectionRefusedError``, a broken one ``ConnectionError``, an answer not read
within the call's time limit ``TimeoutError`` (all ``OSError``); an idle connection is
kept :data:`~agent.connectors.http.KEEPALIVE_SECONDS` at most, under the 5 s after which
uvicorn closes one, and the pool holds at most ``max_connections`` connections.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit

import httptools

from agent.connectors.time_limit import bounded_by
from agent.connectors.transport import Reply, Request

#: Bytes of an answer held before the socket is paused, until the connector reads on.
_HIGH_WATER = 1024 * 1024


class _Headers(Mapping[str, str]):
    """An answer's headers, looked up whatever the case of the name. Kept as the parser
    gives them (bytes, names lowered) and decoded when read: a connector reads two or
    three of an answer's headers, and decoding each as it arrived was a good part of the
    parse (docs/performance.md, "Half the CPU")."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[bytes, bytes]) -> None:
        self._items = items

    def __getitem__(self, name: str) -> str:
        try:
            return self._items[name.lower().encode("latin-1")].decode("latin-1")
        except UnicodeEncodeError:  # no header can be named so
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return name.lower().encode("latin-1") in self._items
        except UnicodeEncodeError:  # no header can be named so
            return False

    def __iter__(self) -> Iterator[str]:
        return (name.decode("latin-1") for name in self._items)

    def __len__(self) -> int:
        return len(self._items)


class _Connection(asyncio.Protocol):
    """One connection to a service, and the answer being read on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, key: tuple[str, int, bool]) -> None:
        self._loop = loop
        self.key = key
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        #: counted out of the pool
        self.dropped = False
        self.idle_since = 0.0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.header_items: dict[bytes, bytes] = {}
        self.body = bytearray()
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.error: BaseException | None = None

    @property
    def headers(self) -> _Headers:
        """The answer's headers by name (made when asked: a whole answer's are read
        from :attr:`header_items`)."""
        return _Headers(self.header_items)

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.fail(ConnectionError(f"bad HTTP answer: {exc}"))
            return
        if len(self.body) > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.complete or self.error is not None:
            return
        if (
            self.headers_done
            and b"content-length" not in self.header_items
            and b"transfer-encoding" not in self.header_items
        ):
            # an answer whose end is the connection's end (HTTP/1.0's way)
            self.complete = True
            self._wake()
            return
        self.fail(exc or ConnectionResetError("Server disconnected"))

    # httptools' callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.lower()
        items = self.header_items
        items[key] = value if key not in items else items[key] + b", " + value

    # (each wakes the reader as _wake does, written out: an answer that arrives whole
    # calls all three, for every service call)

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.headers_done = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.body += body
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_message_complete(self) -> None:
        # asked here: once the callback returns, the parser is ready for the next answer
        # and no longer tells
        # nor after a server error: uvicorn closes the connection when the app raised
        # after its 500 was sent, and a call that took it from the pool before the close
        # arrived failed as reset though the service was up
        self.keep_alive = self._parser.should_keep_alive() and self.status < 500
        self.complete = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # the exchange

    def send(self, head: bytes, body: bytes) -> None:
        assert self.transport is not None
        self._reset()
        self.transport.write(head + body if len(body) < 16384 else head)
        if len(body) >= 16384:
            self.transport.write(body)

    def fail(self, error: BaseException) -> None:
        """End the exchange with ``error`` (raised to its reader), and the connection."""
        if self.error is None:
            self.error = error
        self.close()
        self._wake()

    def time_out(self) -> None:
        """The exchange's time ran out (its error made only then, not for every call)."""
        self.fail(TimeoutError())

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> None:
        """Wait for more of the answer (or its end), raising the exchange's error."""
        if self.error is not None:
            raise self.error
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self.error is not None:
            raise self.error


class _Reply:
    """The answer on a connection, as a :class:`~agent.connectors.transport.Reply`."""

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    @property
    def status(self) -> int:
        return self._connection.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._connection.headers

    # (the two headers read from the parsed ones directly, not through the mapping)

    @property
    def content_type(self) -> str:
        value = self._connection.header_items.get(b"content-type")
        if value is None:
            return "application/octet-stream"
        return value.decode("latin-1").split(";", 1)[0].strip().lower()

    @property
    def content_length(self) -> int | None:
        value = self._connection.header_items.get(b"content-length")
        return int(value) if value is not None and value.isdigit() else None

    async def read(self, limit: int) -> bytes:
        connection = self._connection
        while len(connection.body) < limit and not connection.complete:
            await connection.more()
        if len(connection.body) > limit:
            return bytes(connection.body[:limit])
        return bytes(connection.body)

    async def lines(self) -> AsyncIterator[bytes]:
        connection = self._connection
        body = connection.body
        start = 0
        while True:
            end = body.find(b"\n", start)
            if end >= 0:
                yield bytes(body[start : end + 1])
                start = end + 1
                continue
            if start:
                del body[:start]
                start = 0
            if connection.complete:
                if body:
                    yield bytes(body)
                    body.clear()
                return
            await connection.more()


def _limit_timer(
    loop: asyncio.AbstractEventLoop, deadline: float, connection: _Connection
) -> asyncio.TimerHandle | None:
    """The timer that ends ``connection``'s exchange at ``deadline``, unless the call is
    already cut off by then: the executor's own limit on the call (started first, for the
    same seconds) cancels it in time, and no second timer is set for every service call."""
    return None if bounded_by(deadline) else loop.call_at(deadline, connection.time_out)


class _Exchange:
    """One request on a pooled connection: the answer on entering, the connection back
    to the pool (or closed, when the answer was not read to its end) on leaving."""

    __slots__ = ("_connection", "_pool", "_request", "_time_limit", "_timer")

    def __init__(self, pool: WireTransport, request: Request, time_limit: float) -> None:
        self._pool = pool
        self._request = request
        self._time_limit = time_limit
        self._connection: _Connection | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> Reply:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._time_limit
        pool, request = self._pool, self._request
        target = pool.target(request.url)
        connection = await pool.checkout(target, deadline)
        self._connection = connection
        self._timer = _limit_timer(loop, deadline, connection)
        try:
            connection.send(target.head(request), request.body)
            while not connection.headers_done:
                await connection.more()
        except BaseException:
            self._end()
            raise
        return _Reply(connection)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end()

    def _end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.checkin(connection)


class _Target:
    """Where a URL's requests go, and the start of each request's head."""

    __slots__ = ("_headers", "_prefix", "hostname", "key", "port", "start", "tls")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectionRefusedError(f"not an http(s) URL: {url}")
        self.tls = parts.scheme == "https"
        self.hostname = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.key = (self.hostname, self.port, self.tls)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.start = f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode("latin-1")
        #: a copy of the last headers written, and the head's lines up to the body's
        #: length: a service's calls send the same headers unless a trace is on
        self._headers: dict[str, str] | None = None
        self._prefix = b""

    def head(self, request: Request) -> bytes:
        return self.head_of(request.headers, len(request.body))

    def head_of(self, headers: Mapping[str, str], length: int) -> bytes:
        if headers != self._headers:
            lines = [self.start]
            for name, value in headers.items():
                lines.append(f"{name}: {value}\r\n".encode("latin-1"))
            self._prefix = b"".join(lines)
            self._headers = dict(headers)
        return self._prefix + b"Content-Length: %d\r\n\r\n" % length


class WireTransport:
    """The agent's service calls over its own pool of HTTP/1.1 connections (a
    :class:`~agent.connectors.transport.Transport`); :meth:`aclose` closes them."""

    def __init__(self, max_connections: int, keepalive: float) -> None:
        self._max = max_connections
        self._keepalive = keepalive
        self._idle: dict[tuple[str, int, bool], deque[_Connection]] = {}
        self._targets: dict[str, _Target] = {}
        #: connections open or being opened
        self._open = 0
        #: requests waiting for the pool to have room
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._tls: ssl.SSLContext | None = None

    def send(self, request: Request, time_limit: float) -> _Exchange:
        return _Exchange(self, request, time_limit)

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        time_limit: float,
        max_bytes: int,
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        """What ``send`` and a read of the whole answer do, in one call: the status, the
        headers as the parser gave them (names lowered) and the body, or its first
        ``max_bytes + 1`` bytes when it is longer; an empty body, unread, when the
        answer declares more than ``max_bytes``. No request, exchange or reply object is
        made: a connector reads every answer so, for every service call of every turn
        (docs/performance.md, "Half the CPU"). The same errors as ``send``'s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + time_limit
        target = self._targets.get(url) or self.target(url)
        connection = await self.checkout(target, deadline)
        timer = None if bounded_by(deadline) else loop.call_at(deadline, connection.time_out)
        try:
            connection.send(target.head_of(headers, len(body)), body)
            while not connection.headers_done:
                if connection.error is not None or connection._paused:
                    await connection.more()  # raises the error, or reads on
                    continue
                # what ``more`` does, written out: an answer that comes whole wakes its
                # call once, here, and a frame less is a frame less on every service call
                waiter = connection._waiter = loop.create_future()
                try:
                    await waiter
                finally:
                    connection._waiter = None
                if connection.error is not None:
                    raise connection.error
            declared = connection.header_items.get(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                return connection.status, connection.header_items, b""
            read = connection.body
            while len(read) <= max_bytes and not connection.complete:
                await connection.more()
            raw = bytes(read) if len(read) <= max_bytes else bytes(read[: max_bytes + 1])
            return connection.status, connection.header_items, raw
        finally:
            if timer is not None:
                timer.cancel()
            self.checkin(connection)

    def target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            target = _Target(url)
            if len(self._targets) < 4096:
                self._targets[url] = target
        return target

    async def checkout(self, target: _Target, deadline: float) -> _Connection:
        """A kept connection to ``target`` still open, else a new one once the pool has
        room (waiting at most until ``deadline``)."""
        loop = asyncio.get_running_loop()
        while True:
            idle = self._idle.get(target.key)
            now = loop.time()
            while idle:
                connection = idle.pop()
                if not connection.closed and now - connection.idle_since < self._keepalive:
                    return connection
                self._drop(connection)
            if self._open < self._max or self._close_oldest_idle():
                break
            waiter = loop.create_future()
            self._waiting.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
        self._open += 1
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    lambda: _Connection(loop, target.key),
                    target.hostname,
                    target.port,
                    ssl=self._tls_context() if target.tls else None,
                    server_hostname=target.hostname if target.tls else None,
                )
        except BaseException:
            self._closed_one()
            raise
        return connection

    def checkin(self, connection: _Connection) -> None:
        """Keep ``connection`` for the next request to its host, or close it."""
        if not (  # reusable: its answer read whole, kept alive, not broken or closed
            connection.complete
            and connection.keep_alive
            and connection.error is None
            and not connection.closed
        ):
            self._drop(connection)
            return
        connection.idle_since = asyncio.get_running_loop().time()
        idle = self._idle.get(connection.key)
        if idle is None:
            idle = self._idle[connection.key] = deque()
        idle.append(connection)
        if self._waiting:
            self._wake_one()

    def _drop(self, connection: _Connection) -> None:
        connection.close()
        if not connection.dropped:
            connection.dropped = True
            self._closed_one()

    def _closed_one(self) -> None:
        self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        """Tell the longest-waiting request the pool has a connection or room for one."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    def _close_oldest_idle(self) -> bool:
        """Close the longest-idle connection to any host, to make room; False if none."""
        oldest: deque[_Connection] | None = None
        for idle in self._idle.values():
            if idle and (oldest is None or idle[0].idle_since < oldest[0].idle_since):
                oldest = idle
        if oldest is None:
            return False
        self._drop(oldest.popleft())
        return True

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    async def aclose(self) -> None:
        for idle in self._idle.values():
            while idle:
                self._drop(idle.pop())
