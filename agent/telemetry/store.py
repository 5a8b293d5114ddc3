"""Store operations as spans, by wrapping whichever store the agent opened.

Done from outside rather than by code in each backend: the backends stay unaware of
tracing, and a new backend is traced without a line of its own. :class:`TracedStore` holds
the store and answers each operation of the :class:`~agent.store.base.Store` protocol, and
of each of its parts (:data:`agent.store.base.PARTS`), with a traced call of the store's
own. The store itself is left as it is, so an operation calling another inside the backend
makes one span, with no flag to say so; anything else is the store's. An operation becomes
a span only inside a traced request: the background heartbeat of the user queues makes
none.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from agent.store.base import PARTS, Store

#: Not worth a span: called once per agent, never inside a turn.
_UNTRACED = frozenset({"close"})


def _operations(protocol: type) -> list[str]:
    """The coroutine methods of a store protocol."""
    return sorted(
        name
        for name in dir(protocol)
        if not name.startswith("_")
        and name not in _UNTRACED
        and inspect.iscoroutinefunction(getattr(protocol, name))
    )


def _traced(
    name: str, target: Callable[..., Awaitable[Any]], tracer: Tracer, system: str
) -> Callable[..., Awaitable[Any]]:
    attributes = {"db.system.name": system, "db.operation.name": name}

    @functools.wraps(target)
    async def operation(*args: Any, **kwargs: Any) -> Any:
        if not trace.get_current_span().is_recording():
            return await target(*args, **kwargs)
        with tracer.start_as_current_span(
            f"store.{name}", kind=SpanKind.CLIENT, attributes=attributes
        ):
            return await target(*args, **kwargs)

    return operation


class Traced:
    """An object whose operations (the coroutine methods of ``protocol``) are spans; every
    other attribute is the object's own."""

    def __init__(self, target: Any, protocol: type, tracer: Tracer, system: str) -> None:
        self.target = target
        self._operations = {
            name: _traced(name, getattr(target, name), tracer, system)
            for name in _operations(protocol)
        }

    def __getattr__(self, name: str) -> Any:
        operation = self.__dict__["_operations"].get(name)
        return operation if operation is not None else getattr(self.__dict__["target"], name)


class TracedStore(Traced):
    """A store whose own operations and each part's are spans (its parts are :class:`Traced`
    too, so a caller handed ``store.turns`` holds a traced part)."""

    def __init__(self, store: Store, tracer: Tracer, system: str) -> None:
        super().__init__(store, Store, tracer, system)
        for name, protocol in PARTS.items():
            self.__dict__[name] = Traced(getattr(store, name), protocol, tracer, system)


def traced_store(store: Store, tracer: Tracer, url: str) -> Store:
    """``store`` wrapped, with a span per operation of its own and of each part; ``url``
    only names the database system."""
    system = "sqlite" if url.startswith("sqlite") else "mongodb"
    return cast(Store, TracedStore(store, tracer, system))
