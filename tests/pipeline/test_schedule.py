"""The schedule both executors run a turn on: order, the deadline and an early stop, with
steps written here as an executor writes its own (wait, skip or call, record, finish)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from agent.turn.schedule import Schedule


@dataclass(frozen=True)
class Node:
    name: str
    depends_on: frozenset[str] = frozenset()


@dataclass
class Steps:
    """Skips the services named in ``skip``, hangs in those named in ``hang``, stops the
    turn after ``stopper``, fails in ``bug``; records each event."""

    schedule: Schedule
    skip: Iterable[str] = ()
    hang: Iterable[str] = ()
    stopper: str = ""
    bug: str = ""
    events: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def step(self, node: Node) -> None:
        try:
            await self.schedule.after(node.depends_on)
            if node.name in self.skip:
                self.events.append(f"skipped {node.name}")
                return
            if node.name == self.bug:
                raise RuntimeError("a bug")
            if node.name in self.hang:
                await asyncio.Event().wait()
            self.events.append(f"called {node.name}")
            if node.name == self.stopper:
                self.stop.set()
        except asyncio.CancelledError:
            self.events.append(f"cut off {node.name}")
            raise
        finally:
            self.schedule.finished(node.name)


def graph() -> list[Node]:
    return [Node("a"), Node("b", frozenset({"a"})), Node("c", frozenset({"b"}))]


async def test_each_service_runs_after_those_it_waits_for_and_a_skip_releases_them() -> None:
    nodes = graph()
    steps = Steps(Schedule(n.name for n in nodes), skip={"b"})
    in_time = await steps.schedule.run([steps.step(n) for n in reversed(nodes)], None)
    assert in_time
    assert steps.events == ["called a", "skipped b", "called c"]


async def test_the_deadline_cuts_off_what_is_still_running_and_nothing_is_left_running() -> None:
    nodes = graph()
    steps = Steps(Schedule(n.name for n in nodes), hang={"b"})
    in_time = await steps.schedule.run([steps.step(n) for n in nodes], 0.0)
    assert not in_time
    assert sorted(steps.events) == ["called a", "cut off b", "cut off c"]
    assert steps.schedule.done == {"a", "b", "c"}


async def test_the_kind_may_stop_the_turn_early() -> None:
    nodes = [Node("a"), Node("b", frozenset({"a"})), Node("slow")]
    steps = Steps(Schedule(n.name for n in nodes), hang={"slow", "b"}, stopper="a")
    in_time = await steps.schedule.run([steps.step(n) for n in nodes], None, until=steps.stop)
    assert in_time
    assert steps.events == ["called a", "cut off b", "cut off slow"]


async def test_a_bug_in_a_step_is_raised_once_the_others_have_ended() -> None:
    nodes = [Node("broken"), Node("fine")]
    steps = Steps(Schedule(n.name for n in nodes), bug="broken")
    with pytest.raises(RuntimeError, match="a bug"):
        await steps.schedule.run([steps.step(n) for n in nodes], None)
    assert "called fine" in steps.events


async def test_no_steps_is_a_turn_in_time() -> None:
    assert await Schedule([]).run([], 0.0)
