"""Run one turn through a dp-agent pipeline, with dp-agent's semantics and Chorus's rules.

A service runs once everything in its ``previous_services`` is finished. Its dialog
formatter turns the dialog dict into tasks (one request each; none when it returns an empty
list), each answer goes through the response formatter and then the service's
``state_manager_method``. A ``selector`` skips the services that wait for it and are not
named in its answer; a ``responder`` ends the turn; when the graph ends without a bot
utterance the ``last_chance`` service answers, and when the turn's deadline passes the
``timeout`` service does (Chorus's fallback text if either is missing or fails). As in
dp-agent, a turn has a deadline only when one is set; each service is bounded by its own
``timeout``.

Unlike dp-agent, a failed service costs only its own output: services waiting for it still
run unless they list it in ``required_previous_services``. The turn returns the same
:class:`TurnResult` as Chorus's own executor, so storage, ordering and idempotency are
unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent.connectors.batching import Batcher
from agent.connectors.errors import BadServiceResponse
from agent.dream.dialog import counts_before
from agent.dream.graph import DreamPipeline, DreamService
from agent.dream.state import TurnState, selected_labels
from agent.state.models import (
    FALLBACK_SKILL,
    BotUtterance,
    FailureKind,
    Outcome,
    SkillSelectorDecision,
)
from agent.state.storage_limits import StorageLimits
from agent.telemetry import service_call_span
from agent.telemetry.turn_events import TurnListener
from agent.turn.calls import Skip, TurnTrace, contained, log_agent_failure
from agent.turn.limits import TurnLimits
from agent.turn.schedule import Schedule
from agent.turn.value import Turn, TurnResult

log = logging.getLogger("chorus.dream")

#: Seconds the timeout service gets once the turn's deadline has passed.
TIMEOUT_SERVICE_BUDGET = 2.0


class _Run:
    def __init__(
        self,
        state: TurnState,
        pipeline: DreamPipeline,
        clock: Callable[[], float],
        events: TurnListener,
    ) -> None:
        self.state = state
        self.trace = TurnTrace(state.utterance, clock, events)
        self.started = self.trace.started
        self.schedule = Schedule(node.name for node in pipeline)
        self.status: dict[str, str] = {}
        self.selections: dict[str, set[str]] = {}
        self.responded = asyncio.Event()
        self.stored_bytes = 0

    def record(self, node: DreamService, start: float, outcome: Outcome) -> None:
        self.trace.record(node.name, node.role, start, outcome, dream_group=node.dream_group)

    def fail(self, node: DreamService, cause: FailureKind, message: str) -> None:
        self.trace.fail(node.name, node.role, cause, message)


class DreamExecutor:
    """Runs turns through one dp-agent pipeline; one connector per service."""

    def __init__(
        self,
        pipeline: DreamPipeline,
        connectors: Mapping[str, Batcher[Any]],
        channel_type: str = "http_client",
        clock: Callable[[], float] = time.perf_counter,
        limits: StorageLimits | None = None,
    ) -> None:
        missing = {s.name for s in pipeline.all_services()} - set(connectors)
        if missing:
            raise ValueError(f"no connector for {', '.join(sorted(missing))}")
        self.pipeline = pipeline
        self._connectors = connectors
        self._channel_type = channel_type
        self._clock = clock
        self._names = pipeline.listed_names()
        self._limits = TurnLimits(limits or StorageLimits())
        self.history_window = pipeline.history_window
        #: a dp-agent formatter is shown past utterances whole
        self.whole_history = True

    def arm_for(self, user_id: str) -> None:
        """No experiment: one pipeline answers every dialog."""
        return None

    async def run(self, turn: Turn) -> TurnResult:
        state = TurnState(
            dialog_id=turn.dialog_id,
            channel_type=self._channel_type,
            human=turn.human,
            bot=turn.bot,
            history=list(turn.history),
            utterance=turn.utterance,
            counts=counts_before(turn.history),
            pipeline_names=self._names,
        )
        run = _Run(state, self.pipeline, self._clock, turn.events)
        timed_out = not await self._run_graph(run)
        if timed_out and self.pipeline.timeout is not None:
            await self._run_fallback_service(run, self.pipeline.timeout)
        if state.bot_utterance is None and self.pipeline.last_chance is not None:
            await self._run_fallback_service(run, self.pipeline.last_chance)
        if state.bot_utterance is None:
            state.bot_utterance = BotUtterance(
                text=self.pipeline.fallback_response,
                orig_text=None,
                active_skill=FALLBACK_SKILL,
                confidence=0.0,
                user=turn.bot.model_dump(mode="json"),
                attributes={"selector_reason": "no service added a bot utterance"},
            )
        chosen = state.chosen_index()
        writer, errors = state.bot_utterance.active_skill, state.utterance.errors
        reset = state.attributes_reset
        check = self._limits.merge_or_refuse
        return TurnResult(
            utterance=state.utterance,
            bot_utterance=state.bot_utterance,
            human_attributes=check(
                "human attributes",
                writer,
                {} if reset else turn.human.attributes,
                state.human_attributes if reset else state.human_changes,
                errors,
            ),
            bot_attributes=check(
                "bot attributes", writer, turn.bot.attributes, state.bot_changes, errors
            ),
            chosen=chosen,
            human_profile=check(
                "profile", writer, turn.human.profile.model_dump(), state.profile, errors
            ),
            replace_human_attributes=reset,
        )

    async def _run_graph(self, run: _Run) -> bool:
        """False when the turn's deadline passed first; a responder ends the turn early."""
        deadline = self.pipeline.turn_timeout
        remaining = None if deadline is None else max(run.started + deadline - self._clock(), 0.0)
        steps = [self._step(run, node) for node in self.pipeline]
        in_time = await run.schedule.run(steps, remaining, until=run.responded)
        if not in_time:
            log.warning("turn deadline of %ss reached", self.pipeline.turn_timeout)
        return in_time

    def skip(self, run: _Run, node: DreamService) -> Skip | None:
        """Why the service does not run this turn (None: it runs)."""
        failed = [n for n in sorted(node.requires) if run.status.get(n) != "ok"]
        if failed:
            return Skip(f"required service(s) {', '.join(failed)} gave no output", failure=True)
        for dep in node.depends_on:
            chosen = run.selections.get(dep)
            if chosen and node.label not in chosen:
                return Skip(f"not chosen by the selector {dep}")
        if node.depends_on and all(run.status.get(d) == "skipped" for d in node.depends_on):
            return Skip("every service it waits for was skipped")
        return None

    async def _step(self, run: _Run, node: DreamService) -> None:
        """One service's part of the turn: once everything in its ``previous_services``
        is finished it is skipped or called; a call cancelled by the deadline is cut off,
        one cancelled because a responder ended the turn is skipped."""
        start = self._clock()
        try:
            await run.schedule.after(node.depends_on)
            start = self._clock()
            skip = self.skip(run, node)
            if skip is not None:
                run.status[node.name] = "skipped"
                run.trace.skipped(node.name, node.role, start, skip, dream_group=node.dream_group)
                return
            with service_call_span(node.name, node.role, run.state.utterance, node.dream_group):
                await self._call(run, node, start)
            if "responder" in node.tags and run.status.get(node.name) == "ok":
                run.responded.set()
        except asyncio.CancelledError:
            if run.responded.is_set():  # a responder ended the turn: not a failure
                run.status[node.name] = "skipped"
                run.record(node, start, "skipped")
            else:
                message = f"turn deadline of {self.pipeline.turn_timeout}s reached"
                run.fail(node, "timeout", message)
                run.record(node, start, "timeout")
            raise
        finally:
            run.schedule.finished(node.name)

    async def _call(self, run: _Run, node: DreamService, start: float) -> int:
        """Call the service and apply its answers; its status is ``ok`` or ``failed``."""
        tasks: list[Any] = []
        # A formatter's or python connector's bug costs its service only, as a fault does.
        with contained(node.name, "no answer in time") as end:
            tasks = self._tasks(node, run.state.dialog())
            batcher = self._connectors[node.name]
            sized = await asyncio.gather(*(batcher.submit(t) for t in tasks))
            answers = [answer for answer, _ in sized]
            end.batch = max((size for _, size in sized), default=1)
            for ind, answer in enumerate(answers):
                self._apply(run, node, answer, ind)
        run.status[node.name] = "ok" if end.failure is None else "failed"
        run.trace.ended(node.name, node.role, start, end, dream_group=node.dream_group)
        return len(tasks) if end.failure is None else 0

    def _tasks(self, node: DreamService, dialog: dict[str, Any]) -> list[Any]:
        if node.dialog_formatter is None:
            return [dialog]
        try:
            tasks = node.dialog_formatter(dialog)
        except Exception as exc:  # a bug of the formatter, the agent's own code
            log_agent_failure(node.name)
            raise BadServiceResponse(
                node.name, f"dialog_formatter raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(tasks, list):
            raise BadServiceResponse(
                node.name,
                f"dialog_formatter must return a list of payloads, got {type(tasks).__name__}",
            )
        return tasks

    def _apply(self, run: _Run, node: DreamService, answer: Any, ind: int) -> None:
        if node.response_formatter is not None:
            try:
                answer = node.response_formatter(answer)
            except Exception as exc:  # a bug of the formatter, the agent's own code
                log_agent_failure(node.name)
                raise BadServiceResponse(
                    node.name, f"response_formatter raised {type(exc).__name__}: {exc}"
                ) from exc
        # What could not be stored or read back is refused before it touches the state.
        run.stored_bytes = self._limits.charge(node.name, answer, run.stored_bytes)
        if "selector" in node.tags:
            self._record_selection(run, node, answer)
        try:
            run.state.apply(node.state_manager_method, answer, node.label, ind)
        finally:
            for message in run.state.refusals:  # parts refused, the rest applied
                run.fail(node, "refused", message)
            run.state.refusals.clear()

    def _record_selection(self, run: _Run, node: DreamService, answer: Any) -> None:
        """A selector's answer narrows the services waiting for it (an empty one leaves
        them all to run, as in dp-agent) and is recorded in the turn's ``skill_selection``,
        as a Chorus skill selector's is, for the inspector and ``GET /api/dialogs``."""
        chosen = selected_labels(answer, node.name) if answer else set()
        if chosen:
            run.selections.setdefault(node.name, set()).update(chosen)
        waiting = sorted({s.label for s in self.pipeline if node.name in s.depends_on})
        decisions = run.state.utterance.skill_selection
        earlier = next((d for d in decisions if d.selector == node.name), None)
        if earlier is None:
            decisions.append(
                SkillSelectorDecision(
                    selector=node.name, skills=sorted(chosen), decides=waiting or None
                )
            )
        else:  # one answer per task: the decision is their union
            earlier.skills = sorted(set(earlier.skills) | chosen)

    async def _run_fallback_service(self, run: _Run, node: DreamService) -> None:
        """The timeout or last-chance service, on its own short budget."""
        start = self._clock()
        try:
            async with asyncio.timeout(TIMEOUT_SERVICE_BUDGET):
                await self._call(run, node, start)
        except TimeoutError:
            run.fail(node, "timeout", f"no answer within {TIMEOUT_SERVICE_BUDGET}s")
            run.record(node, start, "timeout")
