"""The composition root: the one place that builds the agent's parts, and closes them.

    settings ─► store (traced) ─────────────┬─► the users' queues, idempotency keys ─┐
    pipeline ─► transport ───► connectors ─► executor ──────────────────────────────┼─► message
                metrics ─────────────────────────────────────────────────────────────┘   flow
                handoffs (store, the users' queues, metrics, the helpdesk webhook) ──► flow
                lifecycle sweep (store, metrics)
                readiness (store, HTTP client, required services); helpdesk webhook (HTTP client)

Each takes only the part of the store it uses (``store.turns``, ``store.queues``, ...:
:data:`agent.store.base.PARTS`), as do the routes (:mod:`agent.api.deps`).

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

from agent.api.readiness import Readiness
from agent.connectors.http import make_transport
from agent.connectors.lazy_client import LazyClient
from agent.connectors.transport import Transport
from agent.flow import END_RETRY, RETRY_WINDOW, MessageFlow
from agent.handoff import Handoffs, Webhook
from agent.handoff.errors import NO_OPERATOR_KEY, NO_SECTION
from agent.handoff.service import FOLLOW_POLL, UNCLAIMED_POLL
from agent.handoff.webhook import FIRST_DELAY as WEBHOOK_FIRST_DELAY
from agent.handoff.webhook import TIMEOUT as WEBHOOK_TIMEOUT
from agent.handoff.webhook import TRIES as webhook_tries
from agent.idempotency import KEY_RETENTION, IdempotencyKeys
from agent.lifecycle import SWEEP_BATCH, SWEEP_INTERVAL, Sweeper
from agent.metrics import Metrics
from agent.queues import QUEUE_WAIT, UserQueues
from agent.settings import Settings
from agent.store import open_store
from agent.store.base import Store
from agent.telemetry import Telemetry, traced_store
from agent.turn.arms import ArmChooser, Experiment
from agent.turn.base import LoadedPipeline, TurnExecutor


@dataclass(frozen=True, slots=True)
class Components:
    """The agent's parts, made once per app and shared by every request."""

    settings: Settings
    pipeline: LoadedPipeline
    #: the experiment whose arms answer dialogs (``pipeline`` is its first arm's); None: one
    #: pipeline answers them all
    experiment: Experiment | None
    store: Store
    client: LazyClient
    executor: TurnExecutor
    metrics: Metrics
    flow: MessageFlow
    readiness: Readiness
    #: handing dialogs to people (off, but answering the routes, without ``handoff`` in
    #: the pipeline file)
    handoffs: Handoffs


@asynccontextmanager
async def assembled(
    settings: Settings,
    pipeline: LoadedPipeline,
    telemetry: Telemetry,
    ready_services: dict[str, str],
    experiment: Experiment | None = None,
) -> AsyncIterator[Components]:
    """Open the store, the services' transport and the HTTP client, build everything on
    them, and close it all.
    ``ready_services`` (:func:`agent.api.readiness.required_services`) is checked when the
    app is created, so a typo in it stops the agent before it listens. With an
    ``experiment``, each arm's pipeline gets its executor (``pipeline`` is the first arm's)."""
    async with AsyncExitStack() as stack:
        store = await open_store(settings.db_url)
        if telemetry.tracer is not None:
            store = traced_store(store, telemetry.tracer, settings.db_url)
        stack.push_async_callback(store.close)
        client = LazyClient()
        stack.push_async_callback(client.aclose)
        transport = make_transport()
        stack.push_async_callback(transport.aclose)
        executor = await _executor(settings, pipeline, experiment, transport, stack)
        # The constants are named here, not left to the defaults, so that a test's agent
        # may use others (monkeypatch.setattr on this module).
        keys = IdempotencyKeys(store.keys, lease=settings.queue_lease, keep_for=KEY_RETENTION)
        stack.push_async_callback(keys.aclose)
        queues = UserQueues(store.queues, lease=settings.queue_lease, max_wait=QUEUE_WAIT)
        stack.push_async_callback(queues.aclose)
        services = [
            name
            for loaded in ([a.pipeline for a in experiment.arms] if experiment else [pipeline])
            for name in loaded.service_names(fallbacks=True)
        ]
        metrics = Metrics(services=services, arms=experiment.names if experiment else ())
        sweeper = Sweeper(
            store.lifecycle,
            settings.retention,
            metrics,
            interval=SWEEP_INTERVAL,
            batch=SWEEP_BATCH,
        )
        sweeper.start()
        stack.push_async_callback(sweeper.aclose)
        webhook = None
        url = None if pipeline.handoff is None else pipeline.handoff.webhook
        if url is not None:
            # create_app refuses a webhook without the key it is signed with
            assert settings.operator_key is not None
            webhook = Webhook(
                client,
                str(url),
                settings.operator_key,
                tries=webhook_tries,
                first_delay=WEBHOOK_FIRST_DELAY,
                timeout=WEBHOOK_TIMEOUT,
            )
            stack.push_async_callback(webhook.aclose)
        # A handoff section without an operator key would leave handed-off users with a
        # silent bot until unclaimed_after, nobody being able to claim: handoffs are off.
        keyed = settings.operator_key is not None
        handoffs = Handoffs(
            store.handoffs,
            store.reader,
            queues,
            pipeline.handoff if keyed else None,
            metrics,
            off_because=NO_SECTION if keyed or pipeline.handoff is None else NO_OPERATOR_KEY,
            webhook=webhook,
            follow_poll=FOLLOW_POLL,
            unclaimed_poll=UNCLAIMED_POLL,
        )
        handoffs.start()
        stack.push_async_callback(handoffs.aclose)
        flow = MessageFlow(
            store.turns,
            executor,
            settings.channel_type,
            ratings=store.ratings,
            metrics=metrics,
            queues=queues,
            keys=keys,
            retry_window=RETRY_WINDOW,
            end_retry=END_RETRY,
            telemetry=telemetry,
            handoffs=handoffs,
        )
        yield Components(
            settings=settings,
            pipeline=pipeline,
            experiment=experiment,
            store=store,
            client=client,
            executor=executor,
            metrics=metrics,
            flow=flow,
            readiness=Readiness(store, client, ready_services),
            handoffs=handoffs,
        )


async def _executor(
    settings: Settings,
    pipeline: LoadedPipeline,
    experiment: Experiment | None,
    transport: Transport,
    closing: AsyncExitStack,
) -> TurnExecutor:
    """The flow's one executor: the pipeline's, or with an ``experiment`` the chooser of
    each arm's (``pipeline`` is the first arm's), their connectors closed with ``closing``."""

    async def made(loaded: LoadedPipeline) -> TurnExecutor:
        return await loaded.executor(
            transport, closing, channel_type=settings.channel_type, limits=settings.limits
        )

    executor = await made(pipeline)
    if experiment is None:
        return executor
    arms = {
        arm.name: executor if arm.pipeline is pipeline else await made(arm.pipeline)
        for arm in experiment.arms
    }
    return ArmChooser(experiment, arms)
