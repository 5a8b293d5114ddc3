"""The circuit breaker and the retry of unopened connections."""

from __future__ import annotations

from typing import Any

import pytest

from agent.connectors.base import Connector
from agent.connectors.breaker import CircuitBreaker, GuardedConnector
from agent.connectors.errors import BadServiceStatus, ServiceUnavailable
from agent.sdk.models import DialogView
from tests.conftest import AgentFactory, service_entry
from tests.support.services import counting_failure, fixed_skill


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_circuit_opens_after_failures_in_a_row_and_retries_later() -> None:
    clock = Clock()
    breaker = CircuitBreaker("s", threshold=2, reset_after=10, clock=clock)
    breaker.before_call()
    breaker.record(ok=False)
    breaker.before_call()
    breaker.record(ok=False)
    with pytest.raises(ServiceUnavailable, match="circuit open after 2 failures"):
        breaker.before_call()
    clock.now = 10.0
    breaker.before_call()  # the trial call
    with pytest.raises(ServiceUnavailable):
        breaker.before_call()  # only one trial at a time
    breaker.record(ok=True)
    assert not breaker.is_open
    breaker.before_call()


def test_a_failed_trial_opens_the_circuit_again() -> None:
    clock = Clock()
    breaker = CircuitBreaker("s", threshold=1, reset_after=5, clock=clock)
    breaker.record(ok=False)
    clock.now = 5.0
    breaker.before_call()
    breaker.record(ok=False)
    with pytest.raises(ServiceUnavailable):
        breaker.before_call()


class Scripted(Connector[DialogView]):
    """A connector that fails as told."""

    name = "scripted"

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def call(self, views: list[DialogView]) -> list[Any]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return [["ok"] for _ in views]


async def test_only_unopened_connections_are_retried() -> None:
    refused = ServiceUnavailable("scripted", "refused", never_connected=True)
    inner = Scripted(refused)
    guarded = GuardedConnector(inner, CircuitBreaker("scripted", 5, 10), retries=1)
    assert await guarded.call([]) == []
    assert inner.calls == 2

    broken = Scripted(ServiceUnavailable("scripted", "reset mid-answer"))
    guarded = GuardedConnector(broken, CircuitBreaker("scripted", 5, 10), retries=3)
    with pytest.raises(ServiceUnavailable, match="reset mid-answer"):
        await guarded.call([])
    assert broken.calls == 1

    status = Scripted(BadServiceStatus("scripted", 500, "x"))
    guarded = GuardedConnector(status, CircuitBreaker("scripted", 5, 10), retries=3)
    with pytest.raises(BadServiceStatus):
        await guarded.call([])
    assert status.calls == 1


def test_an_open_circuit_spares_a_failing_service(services: Any, agent: AgentFactory) -> None:
    failing, seen = counting_failure()
    client = agent(
        {
            "services": {
                "skills": {
                    "failing": {
                        "connector": {
                            "url": f"{services(failing).url}/respond",
                            "breaker_threshold": 2,
                            "breaker_reset": 600,
                        }
                    },
                    "steady": service_entry(services(fixed_skill("steady", "still here", 0.5)).url),
                }
            }
        }
    )
    kinds = []
    for _ in range(4):
        reply = client.post("/", json={"user_id": "u", "payload": "hi"}).json()
        assert reply["response"] == "still here"
        dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
        kinds.append(dialog["utterances"][-2]["errors"][0]["kind"])
    assert kinds == ["bad_status", "bad_status", "unavailable", "unavailable"]
    assert len(seen) == 2
    assert "circuit open" in dialog["utterances"][-2]["errors"][0]["message"]
