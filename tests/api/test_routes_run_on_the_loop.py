"""Every route and every dependency runs on the event loop.

FastAPI runs a plain ``def`` endpoint or dependency in a worker thread, on every request:
one sync dependency once cost the agent 0.5 ms of CPU per turn (a thread hop and its
wake-ups), about a tenth of a SQLite turn (``bench.profile``). Nothing the routes do
blocks, so each of them is ``async``; this keeps a new one from slipping back.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from agent.api.app import create_app
from agent.settings import Settings


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    if dependant.call is not None:
        yield dependant.call
    for sub in dependant.dependencies:
        yield from _calls(sub)


def _runs_on_the_loop(call: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one (FastAPI's security
    schemes)."""
    return inspect.iscoroutinefunction(call) or (
        not inspect.isfunction(call) and inspect.iscoroutinefunction(type(call).__call__)
    )


def _api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """The app's routes, through the routers it includes (FastAPI wraps each one)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _api_routes(included.routes)


def test_no_route_or_dependency_runs_in_a_worker_thread(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text('{"services": {}}')
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/db.sqlite", pipeline=pipeline))
    routes = list(_api_routes(app.routes))
    assert len(routes) > 10
    threaded = sorted(
        {
            f"{route.path}: {getattr(call, '__qualname__', call)}"
            for route in routes
            for call in _calls(route.dependant)
            if not _runs_on_the_loop(call)
        }
    )
    assert threaded == []
