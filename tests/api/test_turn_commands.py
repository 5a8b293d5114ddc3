"""What a turn costs on MongoDB, counted where it matters: the commands the agent sends.

Every MongoDB command is a round trip, so the number of commands of a steady-state turn
(through ``POST /``, the line, the idempotency-free path, the message flow and the
store) is what a remote database makes a turn pay. A PyMongo command listener counts
them per turn; the count must not grow with the dialog. The server is MongoDB or the
FerretDB that tools/ferretdb builds (a stock FerretDB is read one utterance at a time, see
docs/storage.md, and costs more commands).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any
from urllib.parse import urlparse

import pytest
from pymongo import monitoring
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandStartedEvent,
    CommandSucceededEvent,
)

from tests.conftest import AgentFactory, fresh_database, service_entry
from tests.support.services import counter_skill

#: Commands a steady-state turn may send on MongoDB 6+ (see docs/deployment.md's storage
#: section for what each one is).
MOST_COMMANDS = 6
#: Turns compared: the window is full from turn 3 on.
EARLY, LATE = 5, 55


class DatabaseCommands(monitoring.CommandListener):
    """Commands sent to one database, by any client of this process. PyMongo has no way to
    unregister a global listener, so the one registered below stays and filters by name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.database: str | None = None
        self.names: list[str] = []

    def take(self) -> list[str]:
        with self._lock:
            names, self.names = self.names, []
        return names

    def started(self, event: CommandStartedEvent) -> None:
        if event.database_name == self.database:
            with self._lock:
                name = event.command_name
                self.names.append(f"{name} {event.command.get(name)}")

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


_COMMANDS = DatabaseCommands()
monitoring.register(_COMMANDS)


@pytest.fixture
def db_url(mongodb_url: str) -> str:
    """Only MongoDB: the count is of MongoDB commands."""
    return fresh_database(mongodb_url)


def test_a_steady_state_turn_costs_a_few_commands_at_turn_5_and_turn_55(
    services: Any,
    agent: AgentFactory,
    db_url: str,
) -> None:
    _COMMANDS.database = urlparse(db_url).path.lstrip("/")
    client = agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}}
    )
    try:
        costs: dict[int, list[str]] = {}
        for turn in range(1, LATE + 1):
            _COMMANDS.take()
            reply = client.post("/", json={"user_id": "steady", "payload": "count"})
            assert reply.status_code == 200, reply.text
            assert reply.json()["response"] == f"count is {turn}"
            costs[turn] = _COMMANDS.take()
    finally:
        _COMMANDS.database = None
    early, late = costs[EARLY], costs[LATE]
    print(f"turn {EARLY}: {len(early)} commands {dict(Counter(early))}")
    assert Counter(late) == Counter(early), (early, late)
    assert len(early) <= MOST_COMMANDS, early
