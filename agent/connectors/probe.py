"""Is a service reachable at all? For the agent's readiness route, not for turns.

A service is reachable when its host answers HTTP at the configured URL, with any status:
``GET /respond`` of an SDK service is a 405, and that proves the process listens. Only a
refused connection, a reset or no answer in time count as unreachable.
"""

from __future__ import annotations

from agent.connectors.lazy_client import LazyClient


async def unreachable(client: LazyClient, url: str, within: float) -> str | None:
    """None when ``url`` answers within ``within`` seconds, else why not."""
    try:
        await client.status("GET", url, within)
    except TimeoutError:
        return f"no answer from {url} within {within}s"
    except ConnectionError as exc:
        return f"cannot reach {url}: {exc}"
    return None
