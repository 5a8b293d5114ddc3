"""The agent's connection limits: uvicorn's httptools protocol, and its WebSocket one, with
bounds on what a client can hold.

Every bound acts on the bytes as they arrive, before the parser sees them, because that is
where the cost was: httptools grows a header value by concatenation, so one huge header
stalled every user and took memory in proportion, and a request that never finished its
headers held its socket (a file descriptor) for ever (docs/performance.md, "Figures behind
the code's choices"). Per connection:

- **idle**: a connection that sends nothing is closed after uvicorn's keep-alive timeout,
  also before its first request (uvicorn starts that timer only after a first response);
- **header size**: more than ``max_header_bytes`` of request line and headers is answered
  with 431 and the rest is never parsed;
- **header time**: headers not complete ``header_timeout`` seconds after their first byte
  are answered with 408; bytes trickling in do not move that deadline (slowloris);

and per process, **connections**: past ``max_connections`` open ones, a new connection first
makes room by closing the connection that has held its place longest without a whole
request, if for :data:`CROWDED_GRACE` seconds (nothing sent since it connected, or its
headers still coming: a 408 then);
with none such it is answered with 503 and closed (past :data:`REFUSALS_ANSWERED` more,
closed unanswered), so the descriptors left stay with the users already connected and with
the database and service sockets (see docs/trust-boundary.md).

A WebSocket holds its connection after the upgrade, when none of the above applies any
more, so :class:`LimitedWebSocket` bounds it too: at most ``max_websockets`` of the cap
(an upgrade past them is answered 503, leaving the rest of the cap to plain HTTP), closed
(1001) after ``websocket_idle_timeout`` seconds without a message either way while the
route waits for the client (pings do not count), and no message over ``max_message_bytes``
(uvicorn's ``ws_max_size``; 1009).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from asyncio import TimerHandle
from dataclasses import dataclass
from typing import ClassVar

from uvicorn._types import ASGIReceiveEvent, ASGISendEvent
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from agent.api.errors import envelope

log = logging.getLogger("chorus.server")

#: After a refusal the agent stops sending but goes on reading (and dropping) what the client
#: still sends, for at most this long: closing with unread bytes would reset the connection,
#: and the client would see a reset instead of the answer that says what to fix.
LINGER_SECONDS = 2.0

#: Connections past the cap that are answered 503 (and linger) at the same time; past those,
#: a new connection is closed without an answer, so refusals cannot use up descriptors.
REFUSALS_ANSWERED = 32

#: The connection cap's WARNING is logged at most once in this many seconds.
CAP_WARNING_INTERVAL = 60.0

#: At the cap, a connection that has held its place this long without a whole request
#: (nothing sent since it connected, or its headers still coming) is closed to let a new
#: one in. Short enough that a flood of half-sent requests locks new clients out for about
#: this long rather than the header timeout; long enough for an honest client's headers,
#: which come in one packet: only a client slower than this, and only while the agent is
#: full, loses its connection (a 408). Connections kept alive after an answer are pooled
#: by their clients and left to the keep-alive timeout.
CROWDED_GRACE = 1.0


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What one connection, and all of a process's connections, may hold."""

    max_header_bytes: int
    header_timeout: float
    max_connections: int
    max_websockets: int
    websocket_idle_timeout: float
    max_message_bytes: int


class _CapWarning:
    """One WARNING when the cap is first reached, then at most one per interval with the
    count refused meanwhile: a flood of refused connections must not flood the log too."""

    def __init__(self, interval: float = CAP_WARNING_INTERVAL) -> None:
        self.interval = interval
        self.last: float | None = None
        self.refused = 0

    def refused_one(self, limit: int) -> None:
        self.refused += 1
        now = time.monotonic()
        if self.last is not None and now - self.last < self.interval:
            return
        log.warning(
            "%d connections open, the limit (CHORUS_MAX_CONNECTIONS): new connections are "
            "answered 503 and closed until some close (%d refused since the last such line, "
            "logged at most once a minute)",
            limit,
            self.refused,
        )
        self.last = now
        self.refused = 0


class LimitedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds above; :func:`limited_http` binds the
    limits (uvicorn makes one instance per connection from the class)."""

    limits: ClassVar[ServerLimits]
    cap_warning: ClassVar[_CapWarning]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_headers = True  # until a request's headers are complete
        self._header_bytes = 0
        self._headers_done = 0  # requests whose headers were complete, to tell them apart
        self._header_deadline: TimerHandle | None = None
        self._linger: TimerHandle | None = None
        self._refused = False
        self._waiting_since = self.loop.time()  # connected, or its headers' first byte
        over = len(self.connections) - self.limits.max_connections
        if over > 0 and self._make_room():
            over = 0
        if over > 0:
            self.cap_warning.refused_one(self.limits.max_connections)
            if over > REFUSALS_ANSWERED:
                self.transport.abort()  # a flood: give the descriptor back at once
                return
            self._refuse(503, "too many open connections; try again shortly", b"retry-after: 1\r\n")
            return
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._header_deadline, self._linger):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a refusal: dropped unread
        if not self._in_headers:
            super().data_received(data)
            return
        if self._header_deadline is None:
            self._waiting_since = self.loop.time()
            self._header_deadline = self.loop.call_later(
                self.limits.header_timeout, self._headers_too_slow
            )
        # Counted per read: the start of a request pipelined behind another in one read is
        # not counted, so such a request may hold up to one read (256 KiB) more.
        room = self.limits.max_header_bytes - self._header_bytes
        if len(data) <= room:
            self._header_bytes += len(data)
            super().data_received(data)
            return
        # Only what fits goes to the parser: if the headers end within it, the rest is the
        # body or the next request, read as usual; if not, they are too large.
        request = self._headers_done
        self._header_bytes += room
        super().data_received(data[:room])
        if self.transport.is_closing():
            return  # the parser refused the request (400)
        if self._headers_done == request:
            self._refuse(
                431,
                f"request line and headers are over the {self.limits.max_header_bytes} bytes "
                "limit (MAX_HEADER_BYTES): send fewer or smaller headers (cookies, "
                "tokens) or a shorter URL",
            )
            return
        self.data_received(data[room:])

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._headers_done += 1
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True  # what comes next is the next request

    def handle_websocket_upgrade(self) -> None:
        """Upgrade, unless WebSockets already hold their share of the cap: 503 then, so
        idle sockets can never leave plain HTTP clients without a connection."""
        sockets = sum(isinstance(c, LimitedWebSocket) for c in self.connections)
        if sockets >= self.limits.max_websockets:
            self._refuse(
                503,
                f"{sockets} WebSockets are open, the most this agent keeps "
                "(half of CHORUS_MAX_CONNECTIONS); try again shortly",
                b"retry-after: 1\r\n",
            )
            return
        super().handle_websocket_upgrade()

    def _holding_a_place(self) -> bool:
        """Its headers are still coming, or it never sent any, and nothing is being
        answered: closing it loses no work. A connection kept alive after an answer is
        left to the keep-alive timeout (its client pools it)."""
        return (
            self._in_headers
            and not self._refused
            and (self.cycle is None or self.cycle.response_complete)
            and (self._header_deadline is not None or self._headers_done == 0)
            and not self.transport.is_closing()
        )

    def _make_room(self) -> bool:
        """At the cap: close the connection that has held its place longest without a
        whole request (connected with nothing sent, or its headers still coming), if for
        :data:`CROWDED_GRACE` seconds; whether one was closed."""
        oldest: LimitedHttp | None = None
        for other in self.connections:
            if (
                isinstance(other, LimitedHttp)
                and other is not self
                and other._holding_a_place()
                and (oldest is None or other._waiting_since < oldest._waiting_since)
            ):
                oldest = other
        if oldest is None or self.loop.time() - oldest._waiting_since < CROWDED_GRACE:
            return False
        oldest._make_way()
        return True

    def _make_way(self) -> None:
        """Closed for a new connection: one that never sent a byte as keep-alive closes
        it, one whose headers are coming with a 408 that says why."""
        if self._header_deadline is None:
            self.transport.close()
            return
        self._refused = True
        self._header_deadline.cancel()
        self._header_deadline = None
        self._answer(
            408,
            f"request headers were not complete within {CROWDED_GRACE:g} s while the agent "
            "was at its connection limit (CHORUS_MAX_CONNECTIONS)",
        )
        self.transport.close()

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined request stalled while the previous one's answer is being sent: a
            # 408 cannot be put in the middle of it.
            self.transport.close()
            return
        self._refuse(
            408,
            f"request headers were not complete within {self.limits.header_timeout:g} s "
            "(HEADER_TIMEOUT)",
        )

    def _refuse(self, status: int, message: str, extra: bytes = b"") -> None:
        """Answer ``status`` and close: stop sending, drop what still comes, close when the
        client does or after :data:`LINGER_SECONDS`."""
        self._refused = True
        self._unset_keepalive_if_required()
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None
        self._answer(status, message, extra)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _answer(self, status: int, message: str, extra: bytes = b"") -> None:
        body = json.dumps(envelope(status, message)).encode("utf-8")
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: %d\r\n" % len(body),
                b"connection: close\r\n",
                extra,
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(head))


class LimitedWebSocket(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, closed (1001) when idle: no message either way for
    ``websocket_idle_timeout`` seconds while the route waits for the client. A route busy
    answering (a turn) is not idle, and one that sends on its own (the load socket) never
    is; pings and pongs are not messages. :func:`limited_websocket` binds the limits."""

    limits: ClassVar[ServerLimits]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._idle: TimerHandle | None = None
        self._receiving = False
        super().connection_made(transport)
        self._touched()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        super().connection_lost(exc)

    def send_receive_event_to_app(self) -> None:
        self._touched()
        super().send_receive_event_to_app()

    async def send(self, message: ASGISendEvent) -> None:
        if message["type"] == "websocket.send":
            self._touched()
        await super().send(message)

    async def receive(self) -> ASGIReceiveEvent:
        self._receiving = True
        try:
            return await super().receive()
        finally:
            self._receiving = False

    def _touched(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = self.loop.call_later(self.limits.websocket_idle_timeout, self._idle_over)

    def _idle_over(self) -> None:
        self._idle = None
        if self.close_sent or self.transport.is_closing():
            return
        if not self.handshake_complete:
            self.transport.close()
            return
        if not self._receiving or not self.queue.empty():
            self._touched()  # the route is busy with the client's last message
            return
        reason = f"no message for {self.limits.websocket_idle_timeout:g} s (WEBSOCKET_IDLE_TIMEOUT)"
        self.queue.put_nowait({"type": "websocket.disconnect", "code": 1001, "reason": reason})
        self.conn.send_close(1001, reason)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        self.close_timer = self.loop.call_later(self.close_timeout, self.transport.close)


def limited_http(limits: ServerLimits) -> type[LimitedHttp]:
    """The protocol class for uvicorn's ``http=``, bound to ``limits``."""

    class Bound(LimitedHttp):
        pass

    Bound.limits = limits
    Bound.cap_warning = _CapWarning()
    return Bound


def limited_websocket(limits: ServerLimits) -> type[LimitedWebSocket]:
    """The protocol class for uvicorn's ``ws=``, bound to ``limits``."""

    class Bound(LimitedWebSocket):
        pass

    Bound.limits = limits
    return Bound
