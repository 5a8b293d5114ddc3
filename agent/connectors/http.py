"""The HTTP connector: POST ``{"dialogs": [...]}``, read a bounded JSON list back.

All connectors share one ``httpx.AsyncClient`` made in the agent's lifespan. Its engine is
aiohttp (through ``httpx-aiohttp``): DESIGN.md measured httpx's own pool at 115-340 calls/s
on these machines against 470-620 through the aiohttp transport, and a turn makes ~7 calls.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from agent.connectors.errors import (
    BadServiceResponse,
    BadServiceStatus,
    ServiceTimeout,
    ServiceUnavailable,
)
from agent.sdk.models import DialogView, ServiceRequest

#: An answer larger than this is refused without being read whole (a misbehaving service
#: must not be able to exhaust the agent's memory).
DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024


def make_http_client(max_connections: int = 256) -> httpx.AsyncClient:
    """The one client of the agent; its pool is sized for many turns' fan-out at once."""
    limits = httpx.Limits(max_connections=max_connections,
                          max_keepalive_connections=max_connections)
    return httpx.AsyncClient(transport=AiohttpTransport(limits=limits), limits=limits,
                             trust_env=False)


def _timed_out(exc: httpx.TransportError) -> bool:
    """httpx-aiohttp 0.2 maps a refused connection to ``ConnectTimeout``; the aiohttp
    exception it wraps tells the truth."""
    cause = exc.__cause__
    if cause is not None:
        return isinstance(cause, TimeoutError)
    return isinstance(exc, httpx.TimeoutException)


def _never_connected(exc: httpx.TransportError) -> bool:
    return isinstance(exc.__cause__, aiohttp.ClientConnectorError) or isinstance(
        exc, httpx.ConnectError)


class HttpConnector:
    """Calls one service's URL."""

    def __init__(
        self, name: str, url: str, client: httpx.AsyncClient, timeout: float,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.url = url
        self._client = client
        self._timeout = timeout
        self._max_bytes = max_response_bytes

    async def call(self, views: list[DialogView]) -> list[Any]:
        body = ServiceRequest.model_construct(dialogs=views).model_dump_json().encode()
        data = self._parse(await self._post(body))
        if not isinstance(data, list):
            raise BadServiceResponse(
                self.name, f"answer must be a JSON list with one item per dialog, got "
                f"{type(data).__name__}"
            )
        if len(data) != len(views):
            raise BadServiceResponse(
                self.name, f"answer has {len(data)} items for {len(views)} dialogs"
            )
        return data

    async def post_json(self, payload: Any) -> Any:
        """POST any JSON and return the parsed answer (for other protocols)."""
        return self._parse(await self._post(json.dumps(payload).encode()))

    async def _post(self, body: bytes) -> bytes:
        try:
            async with self._client.stream(
                "POST", self.url, content=body, timeout=self._timeout,
                headers={"content-type": "application/json"},
            ) as response:
                raw = await self._read_bounded(response)
        except httpx.TransportError as exc:
            if _timed_out(exc):
                raise ServiceTimeout(self.name, f"no answer within {self._timeout}s") from None
            raise ServiceUnavailable(
                self.name, f"cannot reach {self.url}: {exc or type(exc).__name__}",
                never_connected=_never_connected(exc),
            ) from None
        if not response.is_success:
            raise BadServiceStatus(self.name, response.status_code,
                                   raw.decode("utf-8", "replace"))
        return raw

    async def _read_bounded(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_bytes:
            raise BadServiceResponse(
                self.name, f"answer of {declared} bytes is over the {self._max_bytes} limit"
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise BadServiceResponse(
                    self.name, f"answer is over the {self._max_bytes} bytes limit"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadServiceResponse(self.name, f"answer is not JSON: {exc}") from None

    async def aclose(self) -> None:
        """The shared client is closed by its owner, the agent's lifespan."""
