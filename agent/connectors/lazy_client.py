"""The agent's HTTP client for what is not a turn: readiness checks and the helpdesk webhook.

Turns go over :class:`~agent.connectors.wire.WireTransport`. These other calls are rare
(a probe of ``/ready``, a handoff's event), may go to any URL (a helpdesk over HTTPS,
behind redirects the agent must not follow), and need a full client: httpx, the project's
HTTP interface. It is made on first use, so an agent whose services all run in its process
and that nobody probes loads no HTTP client library for them (aiohttp's session, made at
start-up for these calls, held about 8 MB of the served agent's memory: docs/performance.md).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent.connectors.http import KEEPALIVE_SECONDS

if TYPE_CHECKING:
    import httpx

#: Connections kept to the probed services and the helpdesk at most.
MAX_CONNECTIONS = 64


class LazyClient:
    """One ``httpx.AsyncClient``, made when first asked for, closed by its owner."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    def get(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx  # on first use only: see the module docstring

            # The system's trust store (with SSL_CERT_FILE/SSL_CERT_DIR when set), as the
            # agent trusted before, not certifi's bundle: a helpdesk behind a company CA.
            self._client = httpx.AsyncClient(
                verify=ssl.create_default_context(),
                trust_env=False,
                follow_redirects=False,
                limits=httpx.Limits(
                    max_connections=MAX_CONNECTIONS, keepalive_expiry=KEEPALIVE_SECONDS
                ),
                headers={"User-Agent": "chorus-agent"},
            )
        return self._client

    async def status(
        self,
        method: str,
        url: str,
        within: float,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> int:
        """The status ``url`` answers ``method`` with, its body unread, within ``within``
        seconds in all (httpx's own timeouts bound each step, not the whole). Failures are
        the built-in ones, so callers need not know httpx: ``TimeoutError`` when no answer
        came in time, ``ConnectionError`` (saying why) when the request failed on the way."""
        import httpx  # loaded by get() already

        try:
            async with (
                asyncio.timeout(within),
                self.get().stream(method, url, content=content, headers=headers) as response,
            ):
                return response.status_code
        except httpx.TimeoutException:
            raise TimeoutError(f"no answer within {within}s") from None
        except httpx.TransportError as exc:
            raise ConnectionError(str(exc) or type(exc).__name__) from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
