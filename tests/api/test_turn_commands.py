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

from agent import queues
from tests.conftest import AgentFactory, fresh_mongodb_database, service_entry
from tests.support.services import counter_skill

#: Commands a steady-state turn may send, by server (docs/storage.md says what each one
#: is): on MongoDB 6 and 7, and on MongoDB 8, whose client-level ``bulkWrite`` writes the
#: turn's end in two collections at once.
MOST_COMMANDS = {"mongodb": 6, "mongodb-8": 4}
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
        if event.database_name == self.database or self._bulk_write_here(event):
            with self._lock:
                name = event.command_name
                self.names.append(f"{name} {event.command.get(name)}")

    def _bulk_write_here(self, event: CommandStartedEvent) -> bool:
        """A ``bulkWrite`` is sent to the admin database and names the collections."""
        namespaces = event.command.get("nsInfo", []) if event.command_name == "bulkWrite" else []
        return any(str(ns.get("ns", "")).startswith(f"{self.database}.") for ns in namespaces)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


_COMMANDS = DatabaseCommands()
monitoring.register(_COMMANDS)


@pytest.fixture(params=["mongodb", "mongodb-8"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Only MongoDB: the count is of MongoDB commands."""
    return fresh_mongodb_database(request, request.param)


def test_a_steady_state_turn_costs_a_few_commands_at_turn_5_and_turn_55(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    services: Any,
    agent: AgentFactory,
    db_url: str,
) -> None:
    server = request.node.callspec.params["db_url"]
    _COMMANDS.database = urlparse(db_url).path.lstrip("/")
    # The queue's heartbeat renews the place of a turn in flight every third of the lease,
    # on a timer of its own: a turn it falls in sends one more command, which is not the
    # turn's (a busy machine's slow turn met it). A 600 s lease beats every 200 s, after
    # these turns are done. Likewise the look for interrupts from other replicas, which
    # asks about a turn once it has run half a second: a turn slowed that long by two
    # suites at once sent two more "find users". Here it would wait 600 s.
    monkeypatch.setattr(queues, "INTERRUPT_GRACE", 600.0)
    client = agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}},
        queue_lease=600.0,
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
    assert len(early) <= MOST_COMMANDS[server], early
    # MongoDB 8's turn ends in one bulkWrite, and only there.
    assert any(name.startswith("bulkWrite") for name in early) == (server == "mongodb-8"), early


def test_rating_another_users_answer_costs_what_rating_a_missing_one_does(
    services: Any, agent: AgentFactory, db_url: str
) -> None:
    """A rating that names someone else's answer and one that names nothing send the same
    commands (one update matching the answer and its owner, then the look that tells a full
    list from no match), so how long the 404 takes does not tell whether the id exists; the
    owner's own rating takes that path too, stopping once its update matched."""
    client = agent(
        {"services": {"skills": {"counter": service_entry(services(counter_skill()).url)}}}
    )
    theirs = client.post("/", json={"user_id": "owner", "payload": "count"}).json()
    client.post("/", json={"user_id": "rater", "payload": "count"}).raise_for_status()
    _COMMANDS.database = urlparse(db_url).path.lstrip("/")
    try:
        costs = {}
        for case, user, utt_id in [
            ("other user's", "rater", theirs["utt_id"]),
            ("missing", "rater", theirs["dialog_id"] + "-99"),
            ("own", "owner", theirs["utt_id"]),
        ]:
            _COMMANDS.take()
            rated = client.post(
                "/rating/utterance", json={"user_id": user, "utt_id": utt_id, "rating": 1}
            )
            assert rated.status_code == (200 if case == "own" else 404), rated.text
            costs[case] = [name.split()[0] for name in _COMMANDS.take()]
    finally:
        _COMMANDS.database = None
    assert costs["other user's"] == costs["missing"], costs
    assert costs["own"] == costs["missing"][: len(costs["own"])] == ["distinct", "update"], costs
