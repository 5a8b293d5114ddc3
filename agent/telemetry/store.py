"""Store operations as spans, by wrapping whichever store the agent opened.

A wrapper rather than code in each backend: the backends stay unaware of tracing, and a
new backend is traced without a line of its own. An operation becomes a span only inside a
traced request; the background heartbeat of the user lines makes none.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from agent.store.base import Store

#: Not worth a span: called once per agent, never inside a turn.
_UNTRACED = frozenset({"close"})


class _TracedStore:
    """Forwards every attribute to the store; its coroutine methods open a span each."""

    def __init__(self, store: Store, tracer: Tracer, system: str) -> None:
        self._store = store
        self._tracer = tracer
        self._attributes = {"db.system.name": system}

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._store, name)
        if name in _UNTRACED or not inspect.iscoroutinefunction(target):
            return target
        wrapped = self._wrap(name, target)
        setattr(self, name, wrapped)  # looked up once per operation name
        return wrapped

    def _wrap(self, name: str, target: Callable[..., Awaitable[Any]]) -> Any:
        tracer, attributes = self._tracer, {**self._attributes, "db.operation.name": name}

        @functools.wraps(target)
        async def operation(*args: Any, **kwargs: Any) -> Any:
            if not trace.get_current_span().is_recording():
                return await target(*args, **kwargs)
            with tracer.start_as_current_span(
                f"store.{name}", kind=SpanKind.CLIENT, attributes=attributes
            ):
                return await target(*args, **kwargs)

        return operation


def traced_store(store: Store, tracer: Tracer, url: str) -> Store:
    """``store`` with a span per operation; ``url`` only names the database system."""
    system = "sqlite" if url.startswith("sqlite") else "mongodb"
    return cast(Store, _TracedStore(store, tracer, system))
