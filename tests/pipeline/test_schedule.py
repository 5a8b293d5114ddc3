"""The schedule both executors run a turn on: order, skips, the deadline and an early stop,
with a plan that only records what it is asked to do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from agent.pipeline.calls import Skip
from agent.pipeline.schedule import Schedule


@dataclass(frozen=True)
class Node:
    name: str
    depends_on: frozenset[str] = frozenset()


@dataclass
class Log:
    events: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


class Plan:
    """Skips the services named in ``skip``, hangs in those named in ``hang``, stops the
    turn after ``stopper``, fails in ``bug``."""

    def __init__(
        self, skip: Iterable[str] = (), hang: Iterable[str] = (), stopper: str = "", bug: str = ""
    ) -> None:
        self._skip, self._hang, self._stopper, self._bug = set(skip), set(hang), stopper, bug

    def waits_for(self, run: Log, node: Node) -> list[str]:
        return []

    def skip(self, run: Log, node: Node) -> Skip | None:
        return Skip(f"{node.name} is off") if node.name in self._skip else None

    def skipped(self, run: Log, node: Node, start: float, skip: Skip) -> None:
        run.events.append(f"skipped {node.name}: {skip.reason}")

    async def call(self, run: Log, node: Node, start: float) -> None:
        if node.name == self._bug:
            raise RuntimeError("a bug")
        if node.name in self._hang:
            await asyncio.Event().wait()
        run.events.append(f"called {node.name}")
        if node.name == self._stopper:
            run.stop.set()

    def cut_off(self, run: Log, node: Node, start: float) -> None:
        run.events.append(f"cut off {node.name}")

    def settled(self, run: Log, node: Node) -> None:
        run.events.append(f"settled {node.name}")


def graph() -> list[Node]:
    return [Node("a"), Node("b", frozenset({"a"})), Node("c", frozenset({"b"}))]


async def test_each_service_runs_after_those_it_waits_for_and_a_skip_releases_them() -> None:
    run = Log()
    nodes = graph()
    in_time = await Schedule([n.name for n in nodes], lambda: 0.0).run(
        Plan(skip={"b"}), run, nodes, None
    )
    assert in_time
    assert run.events == [
        "called a",
        "settled a",
        "skipped b: b is off",
        "settled b",
        "called c",
        "settled c",
    ]


async def test_the_deadline_cuts_off_what_is_still_running_and_nothing_is_left_running() -> None:
    run = Log()
    nodes = graph()
    schedule = Schedule([n.name for n in nodes], lambda: 0.0)
    in_time = await schedule.run(Plan(hang={"b"}), run, nodes, 0.0)
    assert not in_time
    assert sorted(run.events) == sorted(
        ["called a", "settled a", "cut off b", "settled b", "cut off c", "settled c"]
    )
    assert all(event.is_set() for event in schedule.done.values())


async def test_the_kind_may_stop_the_turn_early() -> None:
    run = Log()
    nodes = [Node("a"), Node("b", frozenset({"a"})), Node("slow")]
    in_time = await Schedule([n.name for n in nodes], lambda: 0.0).run(
        Plan(hang={"slow", "b"}, stopper="a"), run, nodes, None, until=run.stop
    )
    assert in_time
    assert [e for e in run.events if not e.startswith("settled")] == [
        "called a",
        "cut off b",
        "cut off slow",
    ]


async def test_a_bug_in_a_step_is_raised_once_the_others_have_ended() -> None:
    run = Log()
    nodes = [Node("broken"), Node("fine")]
    with pytest.raises(RuntimeError, match="a bug"):
        await Schedule([n.name for n in nodes], lambda: 0.0).run(
            Plan(bug="broken"), run, nodes, None
        )
    assert "called fine" in run.events
