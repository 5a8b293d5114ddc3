"""Is a service reachable at all? For the agent's readiness route, not for turns.

A service is reachable when its host answers HTTP at the configured URL, with any status:
``GET /respond`` of an SDK service is a 405, and that proves the process listens. Only a
refused connection, a reset or no answer in time count as unreachable.
"""

from __future__ import annotations

import asyncio

from agent.connectors.lazy_client import LazyClient


async def unreachable(client: LazyClient, url: str, within: float) -> str | None:
    """None when ``url`` answers within ``within`` seconds (all of it: httpx's own timeouts
    bound each step), else why not. The answer's body is not read."""
    import httpx  # loaded by the client already; see agent.connectors.lazy_client

    try:
        async with asyncio.timeout(within), client.get().stream("GET", url):
            return None
    except (TimeoutError, httpx.TimeoutException):
        return f"no answer from {url} within {within}s"
    except httpx.TransportError as exc:
        return f"cannot reach {url}: {exc or type(exc).__name__}"
