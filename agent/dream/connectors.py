"""dp-agent's connectors: one task's payload in, one answer out.

* ``http``: POST the formatter's payload as it is and take the first item of the JSON list
  answered. With ``batch_size`` > 1, ``urllist`` or ``num_workers`` the payloads of tasks
  that arrive together (several dialogs at the same stage) are merged key by key into one
  request, as dp-agent's ``QueueListenerBatchifyer`` does, and the i-th answer goes to the
  i-th task.
* ``python``: an object with dp-agent's ``async send(payload, callback)``, from a
  ``module:Class`` name or one of dp-agent's built-in names (:data:`BUILTINS`, written here
  afresh); the connector entry's other keys are its constructor's arguments.

Both speak :class:`agent.connectors.base.Connector`, the protocol of Chorus's own pipelines,
behind the same :class:`~agent.connectors.batching.Batcher`; remote calls go through
the same guard (:class:`~agent.connectors.breaker.GuardedConnector`, without retries, as
dp-agent makes none), and every fault is a :class:`agent.connectors.errors.ServiceError`
naming the service.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from agent.connectors.base import Connector
from agent.connectors.batching import Batcher
from agent.connectors.breaker import CircuitBreaker, GuardedConnector
from agent.connectors.errors import BadServiceResponse, ServiceError
from agent.connectors.http import HttpConnector
from agent.connectors.transport import Transport
from agent.dream.config import HttpConnectorConfig, PythonConnectorConfig
from agent.dream.graph import DreamPipeline, DreamService, import_dotted
from agent.turn.calls import log_agent_failure
from agent.turn.config import PipelineConfigError

#: Circuit breaker settings for Dream's HTTP services (Chorus's defaults).
BREAKER_THRESHOLD = 5
BREAKER_RESET = 10.0


# -- dp-agent's built-in python connectors ----------------------------------------------
# dp-agent calls these objects "connectors"; here they are senders (``send(payload,
# callback)``), which a :class:`PythonConnector` calls like any other python object named
# in a file. Their dp-agent names stay the keys of :data:`BUILTINS`.

Callback = Callable[..., Awaitable[None]]


class PredefinedTextSender:
    """Answers ``{"text": response_text, "annotations": annotations}`` (last-chance and
    timeout answers)."""

    def __init__(self, response_text: str, annotations: dict[str, Any] | None = None) -> None:
        self.response_text = response_text
        self.annotations = annotations or {}

    async def send(self, payload: dict[str, Any], callback: Callback) -> None:
        await callback(
            task_id=payload["task_id"],
            response={"text": self.response_text, "annotations": dict(self.annotations)},
        )


class PredefinedOutputSender:
    """Answers its ``output`` whatever it is asked."""

    def __init__(self, output: Any) -> None:
        self.output = output

    async def send(self, payload: dict[str, Any], callback: Callback) -> None:
        await callback(task_id=payload["task_id"], response=self.output)


class ConfidenceSelectorSender:
    """Answers the most confident hypothesis of the newest utterance (a response selector
    without a service)."""

    async def send(self, payload: dict[str, Any], callback: Callback) -> None:
        try:
            hypotheses = payload["payload"]["utterances"][-1]["hypotheses"]
            response: Any = max(hypotheses, key=lambda h: h["confidence"])
        except Exception as exc:  # handed back as dp-agent does: the service failed
            response = exc
        await callback(task_id=payload["task_id"], response=response)


BUILTINS: dict[str, type] = {
    "PredefinedTextConnector": PredefinedTextSender,
    "PredefinedOutputConnector": PredefinedOutputSender,
    "ConfidenceResponseSelectorConnector": ConfidenceSelectorSender,
}


class PythonConnector(Connector[Any]):
    """Calls a dp-agent python connector and waits for its callback (which it may make
    after ``send`` returns, from a task of its own), for each payload at once."""

    def __init__(self, name: str, instance: Any) -> None:
        self.name = name
        self._instance = instance

    async def call(self, payloads: list[Any]) -> list[Any]:
        return list(await asyncio.gather(*(self._send(p) for p in payloads)))

    async def _send(self, payload: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        task_id = uuid.uuid4().hex

        async def callback(task_id: str, response: Any, **_: Any) -> None:
            if not future.done():
                future.set_result(response)

        try:
            await self._instance.send({"task_id": task_id, "payload": payload}, callback)
        except Exception as exc:  # a bug of the connector, which runs in the agent
            log_agent_failure(self.name)
            raise ServiceError(
                self.name, f"python connector raised {type(exc).__name__}: {exc}"
            ) from exc
        response = await future
        if isinstance(response, Exception):  # the connector's failure, as it reported it
            raise ServiceError(self.name, f"{type(response).__name__}: {response}") from response
        return response


def python_connector(
    service: DreamService, config: PythonConnectorConfig, connectors_module: str | None
) -> PythonConnector:
    """Instantiate the class now, so a bad name or argument stops the agent at start-up."""
    where = (
        f"{service.connector_key}.class_name"
        if service.connector_key.startswith("connectors.")
        else f"services.{service.name}.connector.class_name"
    )
    if ":" not in config.class_name and config.class_name in BUILTINS:
        cls: Any = BUILTINS[config.class_name]
    elif ":" not in config.class_name and connectors_module is None:
        raise PipelineConfigError(
            f"{where}: {config.class_name!r} is not one of dp-agent's built-in connectors "
            f"({', '.join(sorted(BUILTINS))}); write module:Class for your own"
        )
    else:
        cls = import_dotted(config.class_name, where, connectors_module)
    try:
        instance = cls(**config.kwargs())
    except Exception as exc:
        raise PipelineConfigError(
            f"{where}: {config.class_name}(...) failed with the "
            f"connector's other keys: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(getattr(instance, "send", None)):
        raise PipelineConfigError(
            f"{where}: {config.class_name} has no send(payload, callback) method"
        )
    return PythonConnector(service.name, instance)


# -- http --------------------------------------------------------------------------------


class DreamHttpConnector(Connector[Any]):
    """POST the payloads, merged as dp-agent merges a batch (one as it is); the answer is
    a JSON list whose i-th item is the i-th payload's. Several URLs take turns."""

    def __init__(
        self, name: str, config: HttpConnectorConfig, transport: Transport, timeout: float
    ) -> None:
        self.name = name
        self._clients = [HttpConnector(name, url, transport, timeout) for url in config.urls]
        self._next = itertools.cycle(range(len(self._clients)))

    async def call(self, payloads: list[Any]) -> list[Any]:
        try:
            merged = merge_payloads(payloads)
        except ValueError as exc:
            raise ServiceError(self.name, str(exc)) from exc
        answer = await self._clients[next(self._next)].post_json(merged)
        if not isinstance(answer, list) or not answer:
            got = "an empty list" if answer == [] else type(answer).__name__
            raise BadServiceResponse(
                self.name, f"answer must be a JSON list with one item per request, got {got}"
            )
        if len(answer) < len(payloads):
            raise BadServiceResponse(
                self.name, f"answer has {len(answer)} items for {len(payloads)} batched requests"
            )
        return answer[: len(payloads)]


def merge_payloads(payloads: list[Any]) -> Any:
    """dp-agent's ``glue_tasks``: one payload as it is; several merged key by key, the lists
    of the same key concatenated in task order."""
    if len(payloads) == 1:
        return payloads[0]
    if not all(isinstance(p, dict) for p in payloads):
        raise ValueError("only object payloads can be batched")
    merged: dict[str, list[Any]] = {key: [] for key in payloads[0]}
    for payload in payloads:
        for key in merged:
            value = payload.get(key, [])
            merged[key].extend(value if isinstance(value, list) else [value])
    return merged


def make_dream_connectors(pipeline: DreamPipeline, transport: Transport) -> dict[str, Batcher[Any]]:
    """One connector per service; services naming the same top-level connector share it
    (and so its batches), as in dp-agent. Tasks that arrive in the same event-loop
    iteration share one request of up to ``batch_size`` payloads when the connector
    batches (``batch_size``, ``urllist`` or ``num_workers``)."""
    shared: dict[str, Batcher[Any]] = {}
    result: dict[str, Batcher[Any]] = {}
    for service in pipeline.all_services():
        if service.connector_key in shared:
            result[service.name] = shared[service.connector_key]
            continue
        config = service.connector
        batcher: Batcher[Any]
        if isinstance(config, PythonConnectorConfig):
            python = python_connector(service, config, pipeline.connectors_module)
            batcher = Batcher(python, 1)
        else:
            http = DreamHttpConnector(
                service.name, config, transport, pipeline.call_timeout(service)
            )
            breaker = CircuitBreaker(service.name, BREAKER_THRESHOLD, BREAKER_RESET)
            batcher = Batcher(GuardedConnector(http, breaker, retries=0), config.batch_size)
        shared[service.connector_key] = batcher
        result[service.name] = batcher
    return result


def check_python_connectors(pipeline: DreamPipeline) -> None:
    """Import and build every python connector once, so a bad one stops the agent before
    it listens (the lifespan builds them again for use)."""
    for service in pipeline.all_services():
        if isinstance(service.connector, PythonConnectorConfig):
            python_connector(service, service.connector, pipeline.connectors_module)
