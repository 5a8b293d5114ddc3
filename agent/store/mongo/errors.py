"""PyMongo's failures as the store's two exceptions, whatever the backend."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from bson.errors import InvalidDocument
from pymongo.errors import ConnectionFailure, DocumentTooLarge, DuplicateKeyError, WriteError

from agent.store.base import StoreUnavailable, StoreWriteRefused
from agent.store.mongo.outage import Outage

Doc = dict[str, Any]
P = ParamSpec("P")
R = TypeVar("R")


def unavailable_when_unreachable(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Turn PyMongo's connection failures (server selection timeout, lost connection,
    network timeout: all :class:`ConnectionFailure`) into :class:`StoreUnavailable`, and a
    document refused for its content (over 16 MB, not encodable as BSON, a write error
    other than a duplicate key) into :class:`StoreWriteRefused`, so callers handle one
    exception per outcome whatever the backend.

    A method of a part of the store (its ``_outage``, :class:`~.outage.Outage`) waits,
    once a call has failed to reach the server, until one probe has reached it again,
    instead of going to the driver meanwhile (the outage's docstring says why)."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        outage = getattr(args[0], "_outage", None) if args else None
        if isinstance(outage, Outage) and outage.away:  # no coroutine while it is there
            await outage.passed()
        try:
            return await method(*args, **kwargs)
        except ConnectionFailure as exc:
            if isinstance(outage, Outage):
                outage.began()
            raise StoreUnavailable(f"MongoDB store: {exc}") from exc
        except DuplicateKeyError:
            raise
        except (DocumentTooLarge, InvalidDocument, OverflowError, WriteError) as exc:
            raise StoreWriteRefused(f"MongoDB store: {exc}") from exc

    return wrapper
