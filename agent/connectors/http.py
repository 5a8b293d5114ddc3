"""The HTTP connector: POST ``{"dialogs": [...]}``, read a bounded JSON list back.

httpx is the project's HTTP interface (SDK, CLI, tests), but under the connectors, the
agent's hot path, requests go over :class:`~agent.connectors.wire.WireTransport`, chosen by
measurement: a turn makes about 7 service calls, and ``bench/http_clients.py`` measures it
against aiohttp and httpx (docs/performance.md). All connectors share the one transport
made in the agent's lifespan (:func:`make_transport`); tests may hand a connector a
:class:`~agent.connectors.transport.MockTransport` instead. The agent's other HTTP calls
(readiness checks, the helpdesk webhook) go through one httpx client made on first use
(:mod:`agent.connectors.lazy_client`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agent.connectors.base import Connector, Line
from agent.connectors.errors import (
    BadServiceResponse,
    BadServiceStatus,
    ServiceTimeout,
    ServiceUnavailable,
)
from agent.connectors.transport import Reply, Request, Transport
from agent.connectors.wire import WireTransport
from agent.sdk.contracts import CONTRACT_HEADER
from agent.sdk.models import DialogView
from agent.sdk.streaming import STREAM_MEDIA_TYPE, parse_line
from agent.telemetry import outgoing_headers, printable

#: An answer larger than this is refused without being read whole (a misbehaving service
#: must not be able to exhaust the agent's memory).
DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024
#: A streamed answer's reader hands the event loop back after this many lines, or this many
#: bytes of them, whichever comes first: lines already buffered are read without waiting,
#: so a socket read full of a skill's short lines (130,000 fit in 2 MB) would hold every
#: other user's requests until all were parsed. Either bound keeps a hold to a few ms.
YIELD_EVERY_LINES = 64
YIELD_EVERY_BYTES = 64 * 1024
#: Connections the agent's one session keeps to the services at most (the server sets aside
#: as many open files for them: agent/api/serve.py).
DEFAULT_POOL_SIZE = 256
#: Seconds an idle connection to a service is kept for reuse: under the 5 s after which
#: uvicorn (the SDK's server, and most services') closes an idle one, so a turn does not
#: send its request on a connection the service is closing ("Server disconnected", the
#: service's output lost).
KEEPALIVE_SECONDS = 4.0
_JSON = {"Content-Type": "application/json"}
#: :data:`~agent.sdk.contracts.CONTRACT_HEADER` as the wire's parser gives a header's name
_CONTRACT_HEADER = CONTRACT_HEADER.lower().encode("latin-1")
#: The first byte of an answer that is a JSON list or object, in UTF-8.
_JSON_STARTS = (b"[", b"{")
_VIEW_JSON = DialogView.__pydantic_serializer__.to_json


#: The last one-view body written, with its view: the services of one stage are shown the
#: same view (a connector only reads it, and a new state of the turn is a new view), so
#: their calls, made one after another as the stage starts, send the same bytes, written
#: once. One tuple, replaced whole, so agents on other threads never see a view with
#: another's body.
_last_body: tuple[DialogView | None, bytes] = (None, b"")


def request_body(views: list[DialogView]) -> bytes:
    """``{"dialogs": [...]}`` as :class:`ServiceRequest` dumps it, each view written straight
    to bytes: no request model made and no text encoded again, on every service call; a
    stage's one view is written once for all its calls (:data:`_last_body`)."""
    global _last_body
    if len(views) == 1:
        view = views[0]
        last_view, last = _last_body
        if last_view is view:
            return last
        body = b'{"dialogs":[' + _VIEW_JSON(view) + b"]}"
        _last_body = (view, body)
        return body
    return b'{"dialogs":[' + b",".join([_VIEW_JSON(view) for view in views]) + b"]}"


def make_transport(max_connections: int = DEFAULT_POOL_SIZE) -> WireTransport:
    """What the agent's connectors call services over: one pool of kept-alive HTTP/1.1
    connections (:mod:`agent.connectors.wire`), closed by its owner (``aclose``)."""
    return WireTransport(max_connections, KEEPALIVE_SECONDS)


class HttpConnector(Connector[DialogView]):
    """Calls one service's URL."""

    def __init__(
        self,
        name: str,
        url: str,
        transport: Transport,
        timeout: float,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.url = url
        self._transport = transport
        self._timeout = timeout
        self._max_bytes = max_response_bytes

    async def call(self, views: list[DialogView]) -> list[Any]:
        """The answer to ``views``: what :meth:`_post` and :meth:`_one_item` do, their
        checks written out for an answer that passes them, as every service call of every
        turn comes through here (docs/performance.md, "Half the CPU")."""
        try:
            status, headers, raw = await self._transport.post(
                self.url,
                request_body(views),
                outgoing_headers(_JSON),
                self._timeout,
                self._max_bytes,
            )
        except OSError as exc:
            raise self._transport_error(exc) from None
        declared = headers.get(b"content-length")
        if (
            (declared is not None and (not declared.isdigit() or int(declared) > self._max_bytes))
            or len(raw) > self._max_bytes
            or _CONTRACT_HEADER in headers
            or not 200 <= status < 300
        ):
            raw = self._answered(status, headers, raw)
        data = self._parse(raw)
        if type(data) is not list or len(data) != len(views):
            return self._one_item(data, len(views))
        return data

    def _one_item(self, data: Any, views: int) -> list[Any]:
        """The answer, checked to be a list with one item per dialog."""
        if not isinstance(data, list):
            raise BadServiceResponse(
                self.name,
                f"answer must be a JSON list with one item per dialog, got {type(data).__name__}",
            )
        if len(data) != views:
            raise BadServiceResponse(self.name, f"answer has {len(data)} items for {views} dialogs")
        return data

    async def stream(self, view: DialogView) -> AsyncIterator[Line]:
        """One dialog's answer as a streaming skill sends it (:mod:`agent.sdk.streaming`):
        ``start``, ``token``... as they arrive, ``end`` with the one output. A service
        that answers plain JSON instead is read as usual and ends the same way; an
        ``error`` line, a broken line or a stream without ``end`` raise a service error."""
        body = request_body([view])
        headers = outgoing_headers({**_JSON, "Accept": f"{STREAM_MEDIA_TYPE}, application/json"})
        try:
            async with self._transport.send(
                Request(self.url, body, headers), self._timeout
            ) as response:
                if not 200 <= response.status < 300:
                    raw = await self._read_bounded(response)
                    raise BadServiceStatus(
                        self.name, response.status, raw.decode("utf-8", "replace")
                    )
                if response.content_type != STREAM_MEDIA_TYPE:
                    (output,) = self._one_item(self._parse(await self._read_bounded(response)), 1)
                    yield "end", output
                    return
                read = 0
                since_yield = _Since()
                async for raw_line in response.lines():
                    read += len(raw_line)
                    if since_yield.count(len(raw_line)):
                        await asyncio.sleep(0)
                    if read > self._max_bytes:
                        raise BadServiceResponse(
                            self.name, f"answer is over the {self._max_bytes} bytes limit"
                        )
                    if not raw_line.strip():
                        continue
                    try:
                        key, value = parse_line(raw_line)
                    except ValueError as exc:
                        raise BadServiceResponse(self.name, str(exc)) from None
                    if key == "error":
                        raise BadServiceResponse(self.name, f"failed while streaming: {value}")
                    if key == "end":
                        (output,) = self._one_item([value], 1)
                        yield "end", output
                        return
                    yield key, value
        except OSError as exc:
            raise self._transport_error(exc) from None
        raise BadServiceResponse(self.name, "the streamed answer ended without its end line")

    def _transport_error(self, exc: OSError) -> Exception:
        """The service error for a call that failed on the way (no answer in time, no
        connection, a broken one), whether its answer was read whole or streamed."""
        if isinstance(exc, TimeoutError):
            return ServiceTimeout(self.name, f"no answer within {self._timeout}s")
        if isinstance(exc, ConnectionRefusedError):
            why = getattr(exc, "strerror", None) or exc
            return ServiceUnavailable(
                self.name, f"cannot reach {self.url}: {why}", never_connected=True
            )
        return ServiceUnavailable(
            self.name, f"connection to {self.url} failed: {exc or type(exc).__name__}"
        )

    async def post_json(self, payload: Any) -> Any:
        """POST any JSON and return the parsed answer (for other protocols)."""
        return self._parse(await self._post(json.dumps(payload).encode()))

    async def _post(self, body: bytes) -> bytes:
        try:
            status, headers, raw = await self._transport.post(
                self.url, body, outgoing_headers(_JSON), self._timeout, self._max_bytes
            )
        except OSError as exc:
            raise self._transport_error(exc) from None
        return self._answered(status, headers, raw)

    def _answered(self, status: int, headers: Mapping[bytes, bytes], raw: bytes) -> bytes:
        """The body of an answer read whole, or the error that refuses it: too large, a
        contract error of an SDK service, an error status."""
        declared = headers.get(b"content-length")
        self._check_size(int(declared) if declared and declared.isdigit() else None, raw)
        if _CONTRACT_HEADER in headers:
            raise BadServiceResponse(self.name, _contract_message(raw))
        if not 200 <= status < 300:
            raise BadServiceStatus(self.name, status, raw.decode("utf-8", "replace"))
        return raw

    async def _read_bounded(self, response: Reply) -> bytes:
        self._check_size(response.content_length, b"")  # refused before it is read
        raw = await response.read(self._max_bytes + 1)
        self._check_size(None, raw)
        return raw

    def _check_size(self, declared: int | None, raw: bytes) -> None:
        """An answer that declares, or holds, more than the bytes limit is refused: read
        through a :class:`Reply` (:meth:`_read_bounded`) or whole by the transport
        (:meth:`~agent.connectors.transport.Transport.post`)."""
        if declared is not None and declared > self._max_bytes:
            raise BadServiceResponse(
                self.name, f"answer of {declared} bytes is over the {self._max_bytes} limit"
            )
        if len(raw) > self._max_bytes:
            raise BadServiceResponse(self.name, f"answer is over the {self._max_bytes} bytes limit")

    def _parse(self, raw: bytes) -> Any:
        try:
            if raw[:1] in _JSON_STARTS and raw[1:2] != b"\x00":
                # what json.loads(raw) decodes it as (UTF-8: no byte order mark, not
                # UTF-16 or 32), without its look at the encoding on every call
                return json.loads(raw.decode("utf-8", "surrogatepass"))
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadServiceResponse(self.name, f"answer is not JSON: {exc}") from None


class _Since:
    """Lines and bytes read since the loop was last handed back."""

    __slots__ = ("bytes", "lines")

    def __init__(self) -> None:
        self.lines = 0
        self.bytes = 0

    def count(self, size: int) -> bool:
        """Count one line of ``size`` bytes; True (and start again) when it is time to
        hand the loop back."""
        self.lines += 1
        self.bytes += size
        if self.lines < YIELD_EVERY_LINES and self.bytes < YIELD_EVERY_BYTES:
            return False
        self.lines = self.bytes = 0
        return True


def _contract_message(raw: bytes) -> str:
    """What an SDK service said its handler broke (agent/sdk/contracts.py), bounded."""
    try:
        message = json.loads(raw)["message"]
    except (ValueError, KeyError, TypeError):
        message = raw.decode("utf-8", "replace")
    return printable(str(message), 500)
