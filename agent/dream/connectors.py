"""dp-agent's connectors: one task's payload in, one answer out.

* ``http``: POST the formatter's payload as it is and take the first item of the JSON list
  answered. With ``batch_size`` > 1, ``urllist`` or ``num_workers`` the payloads of tasks
  that arrive together (several dialogs at the same stage) are merged key by key into one
  request, as dp-agent's ``QueueListenerBatchifyer`` does, and the i-th answer goes to the
  i-th task.
* ``python``: an object with dp-agent's ``async send(payload, callback)``, from a
  ``module:Class`` name or one of dp-agent's built-in names (:data:`BUILTINS`, written here
  afresh); the connector entry's other keys are its constructor's arguments.

Remote calls go through Chorus's circuit breaker, and every fault is a
:class:`agent.connectors.errors.ServiceError` naming the service.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp

from agent.connectors.batching import Batches
from agent.connectors.breaker import CircuitBreaker
from agent.connectors.errors import BadServiceResponse, ServiceError
from agent.connectors.http import HttpConnector as ChorusHttp
from agent.dream.config import HttpConnector, PythonConnector
from agent.dream.graph import DreamPipeline, DreamService, import_dotted
from agent.pipeline.calls import log_agent_failure
from agent.pipeline.config import PipelineConfigError

#: Circuit breaker settings for Dream's HTTP services (Chorus's defaults).
BREAKER_THRESHOLD = 5
BREAKER_RESET = 10.0


class DreamConnector(Protocol):
    name: str

    async def send(self, payload: Any) -> Any: ...

    async def aclose(self) -> None: ...


# -- dp-agent's built-in python connectors ----------------------------------------------

Callback = Callable[..., Awaitable[None]]


class PredefinedTextConnector:
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


class PredefinedOutputConnector:
    """Answers its ``output`` whatever it is asked."""

    def __init__(self, output: Any) -> None:
        self.output = output

    async def send(self, payload: dict[str, Any], callback: Callback) -> None:
        await callback(task_id=payload["task_id"], response=self.output)


class ConfidenceResponseSelectorConnector:
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
    "PredefinedTextConnector": PredefinedTextConnector,
    "PredefinedOutputConnector": PredefinedOutputConnector,
    "ConfidenceResponseSelectorConnector": ConfidenceResponseSelectorConnector,
}


class PythonAdapter:
    """Calls a dp-agent python connector and waits for its callback (which it may make
    after ``send`` returns, from a task of its own)."""

    def __init__(self, name: str, instance: Any) -> None:
        self.name = name
        self._instance = instance

    async def send(self, payload: Any) -> Any:
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

    async def aclose(self) -> None:
        return None


def python_connector(
    service: DreamService, config: PythonConnector, connectors_module: str | None
) -> PythonAdapter:
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
    return PythonAdapter(service.name, instance)


# -- http --------------------------------------------------------------------------------


class DreamHttp:
    """POST one payload; the answer is a JSON list whose first item is the task's."""

    def __init__(
        self, name: str, config: HttpConnector, session: aiohttp.ClientSession, timeout: float
    ) -> None:
        self.name = name
        self._clients = [ChorusHttp(name, url, session, timeout) for url in config.urls]
        self._next = itertools.cycle(range(len(self._clients)))
        self._breaker = CircuitBreaker(name, BREAKER_THRESHOLD, BREAKER_RESET)
        self.timeout = timeout

    async def post(self, payload: Any) -> list[Any]:
        """POST and check the answer is a list; the breaker sees every outcome."""
        self._breaker.before_call()
        client = self._clients[next(self._next)]
        try:
            answer = await client.post_json(payload)
        except (ServiceError, asyncio.CancelledError):
            self._breaker.record(ok=False)
            raise
        self._breaker.record(ok=True)
        if not isinstance(answer, list) or not answer:
            got = "an empty list" if answer == [] else type(answer).__name__
            raise BadServiceResponse(
                self.name, f"answer must be a JSON list with one item per request, got {got}"
            )
        return answer

    async def send(self, payload: Any) -> Any:
        return (await self.post(payload))[0]

    async def aclose(self) -> None:
        return None


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


class BatchingHttp:
    """Tasks that arrive in the same event-loop iteration share one request of up to
    ``batch_size`` payloads (merged as dp-agent merges them); a lone task goes on the next
    iteration, never waiting."""

    def __init__(self, http: DreamHttp, batch_size: int) -> None:
        self.name = http.name
        self._http = http
        self.batch_size = batch_size
        self._batches: Batches[Any] = Batches(self._post, batch_size)

    async def send(self, payload: Any) -> Any:
        answer, _ = await self.send_sized(payload)
        return answer

    async def send_sized(self, payload: Any) -> tuple[Any, int]:
        """The answer, and how many tasks shared its request (for the turn's trace)."""
        return await self._batches.submit(payload)

    async def _post(self, payloads: list[Any]) -> list[Any]:
        try:
            answers = await self._http.post(merge_payloads(payloads))
        except ServiceError:
            raise
        except Exception as exc:
            raise ServiceError(self.name, str(exc)) from exc
        if len(answers) < len(payloads):
            raise BadServiceResponse(
                self.name, f"answer has {len(answers)} items for {len(payloads)} batched requests"
            )
        return list(answers)

    async def aclose(self) -> None:
        await self._batches.drain()


def make_dream_connectors(
    pipeline: DreamPipeline, session: aiohttp.ClientSession
) -> dict[str, DreamConnector]:
    """One connector per service; services naming the same top-level connector share it
    (and so its batches), as in dp-agent."""
    shared: dict[str, DreamConnector] = {}
    result: dict[str, DreamConnector] = {}
    for service in pipeline.all_services():
        if service.connector_key in shared:
            result[service.name] = shared[service.connector_key]
            continue
        config = service.connector
        connector: DreamConnector
        if isinstance(config, PythonConnector):
            connector = python_connector(service, config, pipeline.connectors_module)
        else:
            http = DreamHttp(service.name, config, session, pipeline.call_timeout(service))
            connector = BatchingHttp(http, config.batch_size) if config.batches else http
        shared[service.connector_key] = connector
        result[service.name] = connector
    return result


def check_python_connectors(pipeline: DreamPipeline) -> None:
    """Import and build every python connector once, so a bad one stops the agent before
    it listens (the lifespan builds them again for use)."""
    for service in pipeline.all_services():
        if isinstance(service.connector, PythonConnector):
            python_connector(service, service.connector, pipeline.connectors_module)
