"""Readiness: can this agent answer turns right now? What ``GET /ready`` reports.

``/ping`` says the process is alive (restart it if not); ``/ready`` says whether to send it
traffic: the store answers and every *required* service is reachable. Required are the
services another one lists in ``required_previous_services`` (without them that one is
skipped) and those named in ``CHORUS_READY_SERVICES``, in every arm's pipeline when an
experiment runs. Other services failing costs only
their own output, so they do not make the agent unready.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from agent.connectors.lazy_client import LazyClient
from agent.connectors.probe import unreachable
from agent.store.base import StoreConnection, StoreUnavailable
from agent.turn.arms import Experiment
from agent.turn.base import LoadedPipeline

OK = "ok"
#: What a caller without the API key reads instead of a problem's details.
DOWN = "down"


class ReadinessReport(BaseModel):
    """The body of ``GET /ready``: 200 when ``ready``, else 503."""

    ready: bool
    store: str = Field(description='"ok", or why the store cannot be used')
    services: dict[str, str] = Field(description='each required service: "ok", or why not')

    def summary(self) -> ReadinessReport:
        """The report for a caller without the API key: ``"ok"`` or ``"down"`` for the
        store and each service, by name. The details (a driver's error naming the
        database's host and port, a service's URL) map the deployment's insides, so they
        go only to callers with the key."""
        return ReadinessReport(
            ready=self.ready,
            store=OK if self.store == OK else DOWN,
            services={name: OK if state == OK else DOWN for name, state in self.services.items()},
        )


def required_services(
    pipeline: LoadedPipeline, named: list[str], experiment: Experiment | None = None
) -> dict[str, str]:
    """The URL of each service readiness waits for; a name not in the pipeline is an error
    (a typo would otherwise make readiness check nothing). With an ``experiment``, those of
    every arm's pipeline (each arm answers dialogs): a name in any arm's pipeline is one,
    and a name two arms give different URLs is reported per arm, as ``arm:name``."""
    pipelines = [(a.name, a.pipeline) for a in experiment.arms] if experiment else [("", pipeline)]
    names = list(dict.fromkeys(n for _, p in pipelines for n in p.service_names()))
    unknown = sorted(set(named) - set(names))
    if unknown:
        raise ValueError(
            f"CHORUS_READY_SERVICES: {', '.join(unknown)} not in the pipeline "
            f"(services: {', '.join(names)})"
        )
    found: dict[str, str] = {}
    for arm, loaded in pipelines:
        urls = loaded.service_urls()
        required = loaded.required_names() | (set(named) & set(loaded.service_names()))
        for name in sorted(required):
            if name in urls:
                same = found.get(name, urls[name]) == urls[name]
                found[name if same else f"{arm}:{name}"] = urls[name]
    return found


class Readiness:
    """Checks the store and the required services, all at once, each with a timeout."""

    def __init__(
        self,
        store: StoreConnection,
        client: LazyClient,
        services: dict[str, str],
        timeout: float = 2.0,
    ) -> None:
        self._store = store
        self._client = client
        self._services = services
        self._timeout = timeout

    async def check(self) -> ReadinessReport:
        store, *services = await asyncio.gather(
            self._store_problem(),
            *(unreachable(self._client, url, self._timeout) for url in self._services.values()),
        )
        report = {
            name: problem or OK for name, problem in zip(self._services, services, strict=True)
        }
        return ReadinessReport(
            ready=store is None and all(p is None for p in services),
            store=store or OK,
            services=report,
        )

    async def _store_problem(self) -> str | None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._store.ping()
        except TimeoutError:
            return f"no answer within {self._timeout}s"
        except StoreUnavailable as exc:
            return str(exc) or "unavailable"
        return None
