"""A crash while 32 users talk: the database server or the agent is killed with SIGKILL in
the middle of their turns and started again, every client retries what failed as a client
told "retry" would, and every user's stored dialog reads back with each message once, its
answer once, in order, and every turn's attribute update applied once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis
from tests.api.test_crash_recovery import write_pipeline
from tests.conftest import service_entry
from tests.support.mongo_server import (
    FerretDB,
    mongodb_required,
    running_ferretdb,
    unavailable_reason,
)
from tests.support.processes import agent_process
from tests.support.servers import ServerThread

# Each test starts a whole stack of processes and kills or restarts part of it under load:
# one at a time (another waits), so that in `make test`'s parallel run two of them do not
# starve each other of CPU. A chain of its own, "restarts", beside the "stack" chain of the
# shipped stack and the benchmarks: two chains, each half as long as the one they made
# (docs/development.md, "Tests run in parallel").
pytestmark = pytest.mark.one_at_a_time("restarts")

USERS = 32
#: Each user's messages: the crash comes once a third of all are answered, so every user
#: still has turns to send through it and after it (6 a user proved no more than 4, and
#: cost half as many turns again on a worker's CPU).
TURNS = 4
#: How long one message may take to be answered, retries included, counted from when it
#: was first sent or, if later, from when the crashed part was back (a restart takes ~2 s;
#: on a busy machine, while other test workers start, it once took most of a minute, and a
#: wait counted from the message alone failed a run that lost nothing).
PATIENCE = 60.0


def counting_echo() -> FastAPI:
    """Answers "answer to <text>" and counts its turns in the human attributes, so an
    attribute update lost or applied twice shows in the count."""
    service = Service("echo")

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        turns = int(dialog.human.attributes.get("turns", 0))
        return SkillHypothesis(
            text=f"answer to {dialog.human_utterance.text}",
            confidence=0.9,
            human_attributes={"turns": turns + 1},
        )

    return service.app


@dataclass
class Talk:
    """The users' conversation: where the agent is, and how far they got."""

    base: str
    answered: int = 0
    failures: int = 0
    #: How many messages were answered when the crash began (None: it has not yet).
    answered_at_crash: int | None = None
    wrong: list[str] = field(default_factory=list)
    halfway: asyncio.Event = field(default_factory=asyncio.Event)
    failed_once: asyncio.Event = field(default_factory=asyncio.Event)
    #: When the crashed part was back (the loop's clock), once it is.
    back_at: float | None = None

    def deadline(self, sent_at: float) -> float | None:
        """Until when a message sent at ``sent_at`` may wait: :data:`PATIENCE` after it was
        sent or after the crashed part came back; None while it is still down (a restart
        that never comes back fails the crash's own call)."""
        if self.answered_at_crash is not None and self.back_at is None:
            return None
        return max(sent_at, self.back_at or 0.0) + PATIENCE


def payload(user: str, turn: int) -> str:
    return f"{user} says {turn}"


async def user(talk: Talk, client: httpx.AsyncClient, name: str, keyed: bool) -> None:
    """One user's messages, one after another; each retried until it is answered."""
    for turn in range(TURNS):
        body = {"user_id": name, "payload": payload(name, turn)}
        headers = {"Idempotency-Key": f"{name}-{turn}"} if keyed else {}
        sent_at = asyncio.get_running_loop().time()
        while True:
            deadline = talk.deadline(sent_at)
            now = asyncio.get_running_loop().time()
            back = (
                ""
                if talk.back_at is None
                else f", the crashed part back {now - talk.back_at:.1f} s"
            )
            assert deadline is None or now < deadline, (
                f"{name} never got turn {turn}: sent {now - sent_at:.1f} s ago{back}"
            )
            try:
                response = await client.post(f"{talk.base}/", json=body, headers=headers)
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code == 200:
                break
            if response is not None and response.status_code not in (409, 503):
                talk.wrong.append(f"{name}: {response.status_code} {response.text}")
                return
            talk.failures += 1
            talk.failed_once.set()
            await asyncio.sleep(0.05)  # a client's back-off before its retry
        if response.json()["response"] != f"answer to {body['payload']}":
            talk.wrong.append(f"{name}: {body['payload']!r} got {response.json()['response']!r}")
        talk.answered += 1
        if talk.answered >= USERS * TURNS // 3:
            talk.halfway.set()


async def converse(talk: Talk, crash: Callable[[Talk], None], keyed: Callable[[int], bool]) -> None:
    limits = httpx.Limits(max_connections=USERS)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        users = [
            asyncio.create_task(user(talk, client, f"user{n}", keyed(n))) for n in range(USERS)
        ]

        async def crash_halfway() -> None:
            await talk.halfway.wait()
            talk.answered_at_crash = talk.answered
            await asyncio.to_thread(crash, talk)
            talk.back_at = asyncio.get_running_loop().time()

        await asyncio.gather(*users, crash_halfway())


def read_back(base: str) -> list[str]:
    """What is wrong with each user's stored dialogs (empty: nothing)."""
    problems = []
    with httpx.Client(base_url=base, timeout=30) as client:
        for n in range(USERS):
            name = f"user{n}"
            dialogs = client.get(f"/api/user/{name}").json()
            texts = [u["text"] for d in dialogs for u in d["utterances"]]
            sent = [payload(name, i) for i in range(TURNS)]
            expected = [t for text in sent for t in (text, f"answer to {text}")]
            if texts != expected:
                problems.append(f"{name}: {texts}")
            turns = dialogs[-1]["human"]["attributes"].get("turns")
            if turns != TURNS:
                problems.append(f"{name}: {turns} turns counted in the attributes")
    return problems


def run_and_check(talk: Talk, crash: Callable[[Talk], None], keyed: Callable[[int], bool]) -> None:
    asyncio.run(converse(talk, crash, keyed))
    assert not talk.wrong, talk.wrong
    # The crash must fall among the turns. Whether a client sees it depends on what was
    # killed: a killed agent drops its connections, but a database back within the driver's
    # server-selection wait is invisible (the agent's calls wait and go on).
    assert talk.answered_at_crash is not None
    assert talk.answered_at_crash < USERS * TURNS, "the crash happened after every turn"
    assert talk.answered == USERS * TURNS
    problems = read_back(talk.base)
    assert not problems, "\n".join(problems)


needs_ferretdb = pytest.mark.skipif(
    bool(os.environ.get("MONGODB_URL"))
    or (unavailable_reason() is not None and not mongodb_required()),
    reason="needs a FerretDB built here, which the test kills (MONGODB_URL is not killed)",
)


@contextlib.contextmanager
def ferretdb(bulk_write: bool) -> Iterator[FerretDB]:
    with running_ferretdb(bulk_write=bulk_write) as db:
        yield db


@needs_ferretdb
@pytest.mark.parametrize("bulk_write", [False, True], ids=["mongodb", "mongodb-8"])
def test_a_database_killed_while_32_users_talk_loses_and_doubles_nothing(
    services: Callable[[FastAPI], ServerThread], tmp_path: Path, bulk_write: bool
) -> None:
    """FerretDB is SIGKILLed mid-turns and restarted on the same data: half the users send
    idempotency keys, half do not (their retries are recognised by their text)."""
    skill = services(counting_echo())
    pipeline = write_pipeline(tmp_path / "pipeline.json", {"echo": service_entry(skill.url)})
    with ferretdb(bulk_write) as db:
        env = {
            "CHORUS_PIPELINE": pipeline,
            "CHORUS_DB_URL": f"{db.url}chorus_crash",
            "CHORUS_QUEUE_LEASE": "1",
        }
        with agent_process(env) as (base, _):
            talk = Talk(base)

            def crash(talk: Talk) -> None:
                db.kill()
                db.start()

            run_and_check(talk, crash, keyed=lambda n: n % 2 == 0)


@pytest.mark.both_stores
def test_an_agent_killed_while_32_users_talk_loses_and_doubles_nothing(
    services: Callable[[FastAPI], ServerThread], tmp_path: Path, db_url: str
) -> None:
    """The agent is SIGKILLed mid-turns and another started on the same store; the users
    send idempotency keys (without one, a message whose turn was stored but whose reply
    was lost cannot be told from the same text sent again)."""
    skill = services(counting_echo())
    env = {
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "pipeline.json", {"echo": service_entry(skill.url)}
        ),
        "CHORUS_DB_URL": db_url,
        "CHORUS_QUEUE_LEASE": "1",
    }
    with contextlib.ExitStack() as stack:
        base, process = stack.enter_context(agent_process(env))

        def kill_then_restart(talk: Talk) -> None:
            process.send_signal(signal.SIGKILL)
            process.wait()
            stack.close()
            talk.base, _ = stack.enter_context(agent_process(env))

        talk = Talk(base)
        run_and_check(talk, kill_then_restart, keyed=lambda n: True)
        assert talk.failures, "no client saw the agent go away"
