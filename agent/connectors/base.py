"""The connector protocol: how both kinds of pipeline call a service.

A Chorus pipeline's payload is a :class:`~agent.sdk.models.DialogView`, a dp-agent
pipeline's whatever its dialog formatter made; either way a connector answers a batch of
payloads with one output each (:meth:`Connector.call`), or one payload as the lines of a
streamed answer (:meth:`Connector.stream`). Every remote connector sits behind one guard
(:class:`agent.connectors.breaker.GuardedConnector`) and one batcher
(:class:`agent.connectors.batching.Batcher`), whichever pipeline it serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

from agent.sdk.streaming import LineKey

Payload = TypeVar("Payload")

#: One line of a streamed answer: ``start``, ``token``... as they come, then ``end`` with
#: the output :meth:`Connector.call` would have answered.
Line = tuple[LineKey, Any]


class Connector(Protocol[Payload]):
    """Anything that answers payloads with one output each.

    Implementations raise :class:`agent.connectors.ServiceError` subclasses and nothing
    else for service faults, and check the answer has exactly one item per payload. A
    class that subclasses the protocol inherits a :meth:`stream` that answers with the
    end line only (it cannot stream), and an :meth:`aclose` with nothing to close.
    """

    name: str

    async def call(self, payloads: list[Payload]) -> list[Any]: ...

    async def stream(self, payload: Payload) -> AsyncIterator[Line]:
        """One payload's answer as it comes: the lines a streaming service sends, ending
        with ``end`` and the output; a service that cannot stream answers its end only."""
        (output,) = await self.call([payload])
        yield "end", output

    async def open(self) -> None:
        """Get ready before the first call (an in-process service's lifespan); a failure
        is the first call's to report, so this never raises."""
        return None

    async def aclose(self) -> None:
        """Release what the connector holds (a shared HTTP session is its owner's)."""
        return None
