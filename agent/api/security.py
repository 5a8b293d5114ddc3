"""Who may read what: an API key from the environment guards the state-reading routes.

``CHORUS_API_KEY`` unset (local ``make run``) leaves reads open, with a warning at start-up;
set, reading dialogs and users needs ``X-API-Key``. The chat endpoints stay open unless
``CHORUS_PROTECT_CHAT`` is true. The agent's own figures (``/metrics`` and the load numbers
of ``/debug/current_load``) need the key too unless ``CHORUS_METRICS_PUBLIC`` is true. Keys
are compared in constant time.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, WebSocket, status
from fastapi.security import APIKeyHeader

from agent.api.deps import SettingsDep, components_of, require_json
from agent.flow import MessageFlow
from agent.settings import Settings
from agent.turn.base import LoadedPipeline

_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the agent's CHORUS_API_KEY")


def holds_key(settings: Settings, key: str | None) -> bool:
    """Whether the caller may see what only the key's holders see: always when no key is
    set (everything is open then), else when ``key`` is the key."""
    expected = settings.api_key
    if expected is None:
        return True
    return key is not None and secrets.compare_digest(
        key.encode(), expected.get_secret_value().encode()
    )


def check_reader_key(settings: Settings, key: str | None) -> None:
    """401/403 unless ``key`` is the agent's API key (or none is set)."""
    expected = settings.api_key
    if expected is None:
        return
    if key is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "this route needs the agent's API key in the X-API-Key header",
            headers={"WWW-Authenticate": "APIKey"},
        )
    if not secrets.compare_digest(key.encode(), expected.get_secret_value().encode()):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "the X-API-Key header is not the agent's API key"
        )


def check_metrics_key(settings: Settings, key: str | None) -> None:
    """The agent's figures: open to all when ``CHORUS_METRICS_PUBLIC`` is true, else as
    :func:`check_reader_key`. One rule for ``/metrics`` and the load numbers, which carry
    the same counts."""
    if not settings.metrics_public:
        check_reader_key(settings, key)


async def require_reader(
    settings: SettingsDep, key: Annotated[str | None, Depends(_header)]
) -> None:
    """Reading stored dialogs and users."""
    check_reader_key(settings, key)


def check_chat_key(settings: Settings, key: str | None) -> None:
    """Talking to the bot: open to all unless ``CHORUS_PROTECT_CHAT`` is true, else as
    :func:`check_reader_key`. One rule for every chat endpoint, HTTP and WebSocket."""
    if settings.protect_chat:
        check_reader_key(settings, key)


def socket_key(websocket: WebSocket) -> str | None:
    """The key a WebSocket client sent: ``X-API-Key``, or ``?api_key=`` for browsers,
    which cannot set headers on a WebSocket."""
    return websocket.headers.get("x-api-key") or websocket.query_params.get("api_key")


async def require_chat(settings: SettingsDep, key: Annotated[str | None, Depends(_header)]) -> None:
    """Talking to the bot, when the deployment protects it."""
    check_chat_key(settings, key)


async def reader_key_held(
    settings: SettingsDep, key: Annotated[str | None, Depends(_header)]
) -> bool:
    """For a route open to all that tells the key's holders more (``GET /ready``): never
    refuses, only says whether the caller holds the key."""
    return holds_key(settings, key)


async def require_metrics_reader(
    settings: SettingsDep, key: Annotated[str | None, Depends(_header)]
) -> None:
    """Reading the agent's figures (``/metrics``)."""
    check_metrics_key(settings, key)


_operator_header = APIKeyHeader(
    name="X-Operator-Key",
    auto_error=False,
    description="the agent's CHORUS_OPERATOR_KEY (the operator routes only)",
)


def check_operator_key(settings: Settings, key: str | None) -> None:
    """403 unless ``key`` is the operator key: the operator routes are closed while
    ``CHORUS_OPERATOR_KEY`` is unset, and the API key never opens them (the two cannot be
    the same: :class:`Settings` refuses that)."""
    expected = settings.operator_key
    if expected is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "the operator routes are off: set CHORUS_OPERATOR_KEY on the agent (docs/handoff.md)",
        )
    if key is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "this route needs the agent's operator key in the X-Operator-Key header",
            headers={"WWW-Authenticate": "APIKey"},
        )
    if not secrets.compare_digest(key.encode(), expected.get_secret_value().encode()):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, "the X-Operator-Key header is not the agent's operator key"
        )


async def require_operator(
    settings: SettingsDep, key: Annotated[str | None, Depends(_operator_header)]
) -> None:
    """Reading and writing dialogs handed to people (``/api/operator/...``)."""
    check_operator_key(settings, key)


ReaderKey = Depends(require_reader)
OperatorKey = Depends(require_operator)
MetricsKey = Depends(require_metrics_reader)
KeyHeld = Annotated[bool, Depends(reader_key_held)]
ChatKey = Depends(require_chat)


@dataclass(frozen=True, slots=True)
class ChatParts:
    """What ``POST /`` uses of the app."""

    flow: MessageFlow
    settings: Settings
    pipeline: LoadedPipeline


async def chat_gate(request: Request, key: Annotated[str | None, Depends(_header)]) -> ChatParts:
    """``POST /``'s checks in their order (its key when the chat is protected, then a JSON
    body) and the parts it uses: one dependency where there were seven, each solved by
    FastAPI on every turn (docs/performance.md, "Half the CPU")."""
    components = components_of(request)
    check_chat_key(components.settings, key)
    await require_json(request)
    return ChatParts(components.flow, components.settings, components.pipeline)
