"""The connector protocol: one async method from a batch of payloads to one output each."""

from __future__ import annotations

from typing import Any, Protocol

from agent.sdk.models import DialogView


class Connector(Protocol):
    """Anything that answers a batch of dialog views with one output per view.

    Implementations raise :class:`agent.connectors.ServiceError` subclasses and nothing
    else for service faults, and check the answer has exactly one item per view.
    """

    name: str

    async def call(self, views: list[DialogView]) -> list[Any]: ...

    async def aclose(self) -> None: ...
