"""What routes get injected: the objects made once in the lifespan, typed."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request, status

from agent.flow import MessageFlow
from agent.settings import Settings
from agent.store.base import Store


async def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


async def _flow(request: Request) -> MessageFlow:
    flow: MessageFlow = request.app.state.flow
    return flow


async def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def require_json(request: Request) -> None:
    """A body that is not JSON gets a 415 that says how to send it."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            f"send the body as JSON with 'Content-Type: application/json' "
            f"(got {content_type or 'no Content-Type'})",
        )


async def _idempotency_key(
    key: Annotated[str | None, Header(alias="Idempotency-Key", pattern=r"^[\w.:-]{1,128}$",
                                      description="retries with the same key are answered "
                                      "once")] = None,
) -> str | None:
    return key


StoreDep = Annotated[Store, Depends(_store)]
IdempotencyKey = Annotated[str | None, Depends(_idempotency_key)]
FlowDep = Annotated[MessageFlow, Depends(_flow)]
SettingsDep = Annotated[Settings, Depends(_settings)]
JsonBody = Depends(require_json)
