"""Store operations as spans, by instrumenting whichever store the agent opened.

Done from outside rather than by code in each backend: the backends stay unaware of
tracing, and a new backend is traced without a line of its own. The store itself is
instrumented: each operation of each part (:data:`agent.store.base.PARTS`), and of the
store's own, is replaced on the instance by a traced one before the composition root hands
the parts out, so every caller holds a traced part, and each keeps its own type, for mypy
and for ``isinstance`` alike. An operation becomes a span only inside a traced request and
outside another store operation (an operation calling another makes one span); the
background heartbeat of the user queues makes none.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from agent.store.base import PARTS, Store

#: Not worth a span: called once per agent, never inside a turn.
_UNTRACED = frozenset({"close"})

#: A store operation is running in this context: the operations it calls make no span.
_inside: ContextVar[bool] = ContextVar("chorus_store_operation", default=False)


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
        if _inside.get() or not trace.get_current_span().is_recording():
            return await target(*args, **kwargs)
        token = _inside.set(True)
        try:
            with tracer.start_as_current_span(
                f"store.{name}", kind=SpanKind.CLIENT, attributes=attributes
            ):
                return await target(*args, **kwargs)
        finally:
            _inside.reset(token)

    return operation


S = TypeVar("S", bound=Store)


def traced_store(store: S, tracer: Tracer, url: str) -> S:
    """``store`` itself, with a span per operation of each part and of its own
    (:data:`agent.store.base.PARTS`); ``url`` only names the database system."""
    system = "sqlite" if url.startswith("sqlite") else "mongodb"
    for target, protocol in [(store, Store), *((getattr(store, n), p) for n, p in PARTS.items())]:
        for name in _operations(protocol):
            setattr(target, name, _traced(name, getattr(target, name), tracer, system))
    return store
