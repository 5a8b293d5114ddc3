"""``/debug/current_load/ws``: dp-agent's load WebSocket.

dp-agent's load page (``GET /debug/current_load``, :mod:`agent.api.routes.debug`) reads
its numbers from this socket: once connected, the client is sent
``{"current_load": {...}, "response_time": {...}}`` as a JSON text frame every
:data:`SEND_EVERY` seconds until it closes the socket, exactly as dp-agent's
``WSstatsHandler`` does. What the client sends is read only to notice that it left.

The numbers are the ones ``GET /debug/current_load?format=json`` answers, and need the
same key (``X-API-Key`` on the upgrade request; none when the agent has no key or
``CHORUS_METRICS_PUBLIC`` is true): without it the upgrade is refused with 403 before any
number is sent.
"""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter, HTTPException, WebSocket, WebSocketException, status
from starlette.websockets import WebSocketDisconnect

from agent.api.deps import MetricsDep, PipelineDep, SettingsDep
from agent.api.routes.debug import current_load
from agent.api.security import check_metrics_key

router = APIRouter(prefix="/debug", tags=["debug"])

#: Seconds between two messages (dp-agent's ``WSstatsHandler.update_time``).
SEND_EVERY = 0.5


@router.websocket("/current_load/ws")
async def current_load_ws(
    websocket: WebSocket, metrics: MetricsDep, pipeline: PipelineDep, settings: SettingsDep
) -> None:
    try:
        check_metrics_key(settings, websocket.headers.get("x-api-key"))
    except HTTPException as exc:
        raise WebSocketException(status.WS_1008_POLICY_VIOLATION, str(exc.detail)) from None
    await websocket.accept()
    left = asyncio.create_task(_until_closed(websocket))
    try:
        while not left.done():
            await websocket.send_json(current_load(metrics, pipeline).model_dump())
            await asyncio.wait([left], timeout=SEND_EVERY)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the client left between two messages
    finally:
        left.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await left


async def _until_closed(websocket: WebSocket) -> None:
    """Returns when the client closes the socket (or the server shuts down)."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
