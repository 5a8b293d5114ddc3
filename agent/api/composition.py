"""The composition root: the one place that builds the agent's parts, and closes them.

    settings ─► store (traced) ─────────────┬─► the user's lines, idempotency keys ─┐
    pipeline ─► HTTP client ─► connectors ─► executor ──────────────────────────────┼─► message
                metrics ─────────────────────────────────────────────────────────────┘   flow
                lifecycle sweep (store, metrics)
                readiness (store, HTTP client, required services)

The app's lifespan opens :func:`assembled` once and keeps the :class:`Components` on the
app; routes reach them only through :mod:`agent.api.deps`. Every other module receives
what it needs as arguments, so a test can build any part on its own, and this file is the
one to read to see how the agent fits together. Parts are closed in the reverse order of
their making, also when making a later one fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import aiohttp

from agent.api.readiness import Readiness
from agent.connectors.http import make_http_client
from agent.dream.connectors import make_dream_connectors
from agent.dream.executor import DreamExecutor
from agent.dream.graph import DreamPipeline
from agent.flow import MessageFlow
from agent.idempotency import IdempotencyKeys
from agent.lifecycle import Sweeper
from agent.lines import UserLines
from agent.metrics import Metrics
from agent.pipeline.connectors import make_batchers
from agent.pipeline.executor import Executor
from agent.pipeline.graph import Pipeline
from agent.settings import Settings
from agent.store import open_store
from agent.store.base import Store
from agent.telemetry import Telemetry, traced_store


@dataclass(frozen=True, slots=True)
class Components:
    """The agent's parts, made once per app and shared by every request."""

    settings: Settings
    pipeline: Pipeline | DreamPipeline
    store: Store
    client: aiohttp.ClientSession
    executor: Executor | DreamExecutor
    metrics: Metrics
    flow: MessageFlow
    readiness: Readiness


def _executor(
    settings: Settings,
    pipeline: Pipeline | DreamPipeline,
    client: aiohttp.ClientSession,
    stack: AsyncExitStack,
) -> Executor | DreamExecutor:
    """The executor for the pipeline's format, its connectors closed with the stack."""
    if isinstance(pipeline, DreamPipeline):
        connectors = make_dream_connectors(pipeline, client)
        for connector in {id(c): c for c in connectors.values()}.values():  # shared ones once
            stack.push_async_callback(connector.aclose)
        return DreamExecutor(
            pipeline, connectors, settings.channel_type, limits=settings.storage_limits()
        )
    batchers = make_batchers(pipeline, client)
    for batcher in batchers.values():
        stack.push_async_callback(batcher.aclose)
    return Executor(pipeline, batchers, limits=settings.storage_limits())


def _service_names(pipeline: Pipeline | DreamPipeline) -> list[str]:
    """Every service the pipeline may call, a dp-agent pipeline's fallbacks included."""
    if isinstance(pipeline, DreamPipeline):
        return [service.name for service in pipeline.all_services()]
    return [node.name for node in pipeline]


@asynccontextmanager
async def assembled(
    settings: Settings,
    pipeline: Pipeline | DreamPipeline,
    telemetry: Telemetry,
    ready_services: dict[str, str],
) -> AsyncIterator[Components]:
    """Open the store and the HTTP client, build everything on them, and close it all.
    ``ready_services`` (:func:`agent.api.readiness.required_services`) is checked when the
    app is created, so a typo in it stops the agent before it listens."""
    async with AsyncExitStack() as stack:
        store = await open_store(settings.db_url)
        if telemetry.tracer is not None:
            store = traced_store(store, telemetry.tracer, settings.db_url)
        stack.push_async_callback(store.close)
        client = make_http_client()
        stack.push_async_callback(client.close)
        executor = _executor(settings, pipeline, client, stack)
        keys = IdempotencyKeys(store, lease=settings.line_lease, keep_for=settings.key_retention)
        stack.push_async_callback(keys.aclose)
        lines = UserLines(store, lease=settings.line_lease, max_wait=settings.line_wait)
        stack.push_async_callback(lines.aclose)
        metrics = Metrics(services=_service_names(pipeline))
        sweeper = Sweeper(
            store,
            settings.retention(),
            metrics,
            interval=settings.sweep_interval,
            batch=settings.sweep_batch,
        )
        sweeper.start()
        stack.push_async_callback(sweeper.aclose)
        flow = MessageFlow(
            store,
            executor,
            settings.channel_type,
            metrics=metrics,
            lines=lines,
            keys=keys,
            retry_window=settings.retry_window,
            end_retry=settings.end_retry,
            telemetry=telemetry,
        )
        yield Components(
            settings=settings,
            pipeline=pipeline,
            store=store,
            client=client,
            executor=executor,
            metrics=metrics,
            flow=flow,
            readiness=Readiness(store, client, ready_services),
        )
