"""Run one turn through the service graph.

Every service runs as soon as what it waits for is done, so independent services overlap
and a turn lasts as long as its critical path. Each call has its own timeout and the turn
a deadline; a service that fails loses only its own output, recorded as a
:class:`ServiceFailure`, and the turn goes on to an answer (the fallback one if no
hypothesis survives). ``await executor.run(turn)`` returns the finished turn: nothing is
left running behind it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from agent.connectors.batching import Batcher
from agent.connectors.builtin import highest_confidence
from agent.connectors.errors import DROPPED
from agent.connectors.time_limit import time_limit
from agent.pipeline import outputs
from agent.pipeline.budgets import Reservation, TokenLedger
from agent.pipeline.graph import Pipeline, ServiceNode
from agent.pipeline.tiers import Streaming, lower_tiers
from agent.pipeline.views import dialog_view, people, utterance_view
from agent.sdk.models import DialogView, Selection, UtteranceView
from agent.state.models import (
    FALLBACK_SKILL,
    BotUtterance,
    HumanUtterance,
    SkillSelectorDecision,
    Utterance,
)
from agent.state.storage_limits import StorageLimits
from agent.state.write_once import KeyWrittenTwice, WriteOnce
from agent.telemetry import NO_SPAN, service_call_span
from agent.turn.calls import CallEnd, Skip, TurnTrace, failure_of
from agent.turn.limits import RefusedOutput, TurnLimits
from agent.turn.schedule import Schedule
from agent.turn.value import Turn, TurnResult

log = logging.getLogger("chorus.executor")

#: A hypothesis field copied into the reply's attributes when its hypothesis is chosen: the
#: sources the answer cites, ``[{"n": 1, "source": ..., "section": ..., "link": ...}]``.
CITATIONS = "citations"


class _Run:
    """The mutable state of one turn in flight; only the executor touches it."""

    def __init__(
        self,
        turn: Turn,
        pipeline: Pipeline,
        clock: Callable[[], float],
        limits: TurnLimits | None = None,
    ) -> None:
        self.turn = turn
        #: the turn's human utterance (an attribute, not a property: read a dozen times
        #: a turn)
        self.utterance: HumanUtterance = turn.utterance
        self.trace = TurnTrace(turn.utterance, clock, turn.events)
        self.started = self.trace.started
        self.schedule = Schedule([node.name for node in pipeline])
        self.done = self.schedule.done
        self.ok: set[str] = set()
        self.selected: set[str] = set()
        #: The skills the selectors decide about (None: every skill).
        self.decided: set[str] | None = set()
        self.selection: Selection | None = None
        self.skill_order = {n.name: i for i, n in enumerate(pipeline.services_of("skills"))}
        self.limits = limits or TurnLimits(StorageLimits())
        self.stored_bytes = 0
        turn.utterance.annotations = WriteOnce(turn.utterance.annotations)
        self.bot_utterance: BotUtterance | None = None
        #: The views of the turn's stored utterances, by ``id()``, made at the first call.
        self.history_views: dict[int, UtteranceView] | None = None
        #: The views made since the turn's state last changed, by context window and
        #: token allowance: the services of one stage are shown the same view.
        self.views: dict[tuple[int, int | None], DialogView] = {}
        #: The user and the bot as every view of the turn shows them.
        self.people = people(turn.human, turn.bot)
        #: The streaming skill whose announced confidence met its stream_min_confidence
        #: first, and why: its hypothesis answers the turn.
        self.claimed: tuple[str, str] | None = None
        #: Speculative skills' calls in flight, dropped when a lower tier answers first.
        self.speculating: dict[str, asyncio.Task[None]] = {}
        self.dropped: dict[str, str] = {}
        #: Streaming skills being read: their tokens wait here until their answer is sure.
        self.streams: dict[str, Streaming] = {}
        #: Tokens each skill reported spending this turn (its hypotheses' ``usage``).
        self.tokens: dict[str, int] = {}
        #: Pieces each streaming skill sent this turn: what a stream that ends without
        #: its usage (dropped, failed, cut) is counted as.
        self.streamed: dict[str, int] = {}
        #: The token budgets' holds of the calls admitted this turn, until they settle.
        self.reservations: dict[str, Reservation] = {}

    def window(self) -> list[Utterance]:
        shown: list[Utterance] = [*self.turn.history, self.turn.utterance]
        if self.bot_utterance is not None:
            shown.append(self.bot_utterance)
        return shown

    def view(self, node: ServiceNode, max_tokens: int | None = None) -> DialogView:
        """What ``node`` is shown. Made once per state of the turn (:meth:`changed` says
        when it moves on) and window: a connector only reads a view (an in-process one
        copies it for its service), so the calls of one stage share it."""
        key = (node.config.context_window, max_tokens)
        made = self.views.get(key)
        if made is not None:
            return made
        if self.history_views is None:
            # the stored utterances do not change during the turn: viewed once, shown to
            # every service
            self.history_views = {id(u): utterance_view(u) for u in self.turn.history}
        made = self.views[key] = dialog_view(
            self.turn.dialog_id,
            self.window(),
            self.people,
            node.config.context_window,
            max_tokens,
            self.history_views,
        )
        return made

    def changed(self) -> None:
        """The turn's state is about to change (an output written, the answer chosen): the
        views made so far show it as it was."""
        self.views.clear()

    def confident_below(self, node: ServiceNode, lower: list[ServiceNode]) -> str | None:
        """Why a tiered skill is not needed: the lower tiers' confident hypothesis, if one
        reached its ``run_below``."""
        threshold = node.config.run_below
        names = {n.name for n in lower}
        for hypothesis in self.utterance.hypotheses:
            if (
                threshold is not None
                and hypothesis.skill_name in names
                and hypothesis.confidence >= threshold
            ):
                return (
                    f"{hypothesis.skill_name} answered with confidence "
                    f"{hypothesis.confidence:g}, at least its run_below {threshold:g}"
                )
        return None


class Executor:
    """Runs turns through one pipeline with one connector per service."""

    def __init__(
        self,
        pipeline: Pipeline,
        batchers: Mapping[str, Batcher[DialogView]],
        clock: Callable[[], float] = time.perf_counter,
        limits: StorageLimits | None = None,
        ledger: TokenLedger | None = None,
    ) -> None:
        missing = {n.name for n in pipeline} - set(batchers)
        if missing:
            raise ValueError(f"no connector for {', '.join(sorted(missing))}")
        self.pipeline = pipeline
        self._batchers = batchers
        self._clock = clock
        self._limits = TurnLimits(limits or StorageLimits())
        # Response annotators run on the chosen answer, after everything else.
        self._before_answer = [n for n in pipeline if n.role != "response_annotators"]
        self._after_answer = pipeline.services_of("response_annotators")
        #: Tokens spent per skill per dialog and per day, against their budgets.
        self.ledger = ledger or TokenLedger()
        skills = pipeline.services_of("skills")
        self._skills = {node.name: node for node in skills}
        self._lower = {node.name: lower_tiers(node, skills) for node in skills}
        #: What each service waits for: those it depends on, and for a tiered skill the
        #: lower tiers, unless it runs speculatively.
        self._waits = {
            node.name: [
                *node.depends_on,
                *(
                    []
                    if node.config.speculative
                    else [lower.name for lower in self._lower.get(node.name, [])]
                ),
            ]
            for node in pipeline
        }
        self.history_window = pipeline.history_window
        #: a service is shown of a past utterance only what a read as shown keeps (views.py)
        self.whole_history = False

    def arm_for(self, user_id: str) -> None:
        """No experiment: one pipeline answers every dialog."""
        return None

    async def run(self, turn: Turn) -> TurnResult:
        run = _Run(turn, self.pipeline, self._clock, self._limits)
        deadline = run.started + self.pipeline.turn_timeout
        await self._run_nodes(run, self._before_answer, deadline)
        bot_utterance = self._answer(run)
        run.changed()
        run.bot_utterance = bot_utterance
        bot_utterance.annotations = WriteOnce()
        await self._run_nodes(run, self._after_answer, deadline)
        index = run.selection.index if run.selection is not None else None
        chosen = run.utterance.hypotheses[index] if index is not None else None
        human_attributes, bot_attributes = self._limits.attribute_merges(
            chosen, run.turn.human, run.turn.bot, run.utterance.errors
        )
        if run.tokens:
            in_dialog, by_user = self.ledger.recorded(
                run.turn.bot.attributes, run.turn.human.attributes, run.tokens
            )
            bot_attributes = {**bot_attributes, **in_dialog}
            human_attributes = {**human_attributes, **by_user}
        return TurnResult(
            utterance=run.utterance,
            bot_utterance=bot_utterance,
            human_attributes=human_attributes,
            bot_attributes=bot_attributes,
            chosen=index,
        )

    async def _run_nodes(self, run: _Run, nodes: list[ServiceNode], deadline: float) -> None:
        remaining = max(deadline - self._clock(), 0.0)
        steps = [self._step(run, node) for node in nodes]
        if not await run.schedule.run(steps, remaining):
            log.warning("turn deadline of %ss reached", self.pipeline.turn_timeout)

    async def _step(self, run: _Run, node: ServiceNode) -> None:
        """One service's part of the turn: once what it waits for is done, it is skipped
        or called; a call the deadline cancels is recorded as cut off."""
        start = self._clock()
        try:
            waits = self._waits[node.name]
            if waits:
                await run.schedule.after(waits)
                start = self._clock()
            skip = self.skip(run, node)
            if skip is not None:
                run.trace.skipped(node.name, node.role, start, skip)
                return
            span = service_call_span(node.name, node.role, run.utterance)
            if node.config.speculative:
                with span:
                    await self._speculate(run, node, start)
            elif span is NO_SPAN:  # no tracing: no context entered around every call
                await self._call(run, node, start)
            else:
                with span:
                    await self._call(run, node, start)
        except asyncio.CancelledError:
            message = f"turn deadline of {self.pipeline.turn_timeout}s reached"
            run.trace.fail(node.name, node.role, "timeout", message)
            run.trace.record(node.name, node.role, start, "timeout")
            raise
        finally:
            run.schedule.finished(node.name)
            if node.config.budget is not None:  # (only a budget's call holds or counts)
                self._settle(run, node)
            if run.streams:
                self._release(run)

    def _settle(self, run: _Run, node: ServiceNode) -> None:
        """Count what the call spent, however it ended, and release its budget's hold: its
        hypotheses' ``usage`` when it reported one, else, for a skill with a budget, the
        pieces it streamed (a stream dropped, failed or cut before its end, or one that
        reports no usage), a token each, as an LLM streams them; the prompt's tokens of
        such a call are not known. A streaming skill without a budget (a story told in
        pieces) is not an LLM's spending to count."""
        used = run.tokens.get(node.name)
        if used is None and node.config.budget is not None:
            used = run.streamed.get(node.name, 0)
            if used:
                run.tokens[node.name] = used
        reservation = run.reservations.pop(node.name, None)
        if reservation is not None:
            self.ledger.settle(reservation, used or 0)

    async def _speculate(self, run: _Run, node: ServiceNode, start: float) -> None:
        """Call a speculative skill at once, as a task that :meth:`_drop_outrun` cancels
        when a lower tier answers confidently first; then the call is recorded as dropped,
        not failed."""
        task = asyncio.create_task(self._call(run, node, start))
        run.speculating[node.name] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if node.name not in run.dropped or (current is not None and current.cancelling()):
                raise
            log.debug("dropped %s: %s", node.name, run.dropped[node.name])
            run.trace.record(node.name, node.role, start, "dropped")
        finally:
            run.speculating.pop(node.name, None)

    def _drop_outrun(self, run: _Run) -> None:
        """Cancel every speculative call a lower tier's confident hypothesis made useless."""
        for name, task in list(run.speculating.items()):
            why = run.confident_below(self._skills[name], self._lower[name])
            if why is not None and name not in run.dropped and not task.done():
                run.dropped[name] = why
                task.cancel(DROPPED)

    def skip(self, run: _Run, node: ServiceNode) -> Skip | None:
        """Why the service does not run this turn (None: it runs)."""
        failed = node.requires - run.ok
        if failed:
            return Skip(
                f"required service(s) {', '.join(sorted(failed))} gave no output", failure=True
            )
        if node.role == "skills" and self._not_selected(run, node):
            return Skip("not chosen by the skill selector")
        if node.role == "skills" and node.config.tier:
            why = run.confident_below(node, self._lower[node.name])
            if why is not None:
                return Skip(why)
        if node.role in ("candidate_annotators", "response_selectors") and not (
            run.utterance.hypotheses
        ):
            return Skip("no hypotheses")
        if node.role == "response_selectors" and self._claimed(run) is not None:
            return Skip("a streaming skill's announced confidence chose the answer")
        if node.config.budget is not None:  # last: an admitted call holds its tokens at once
            reserved = self.ledger.reserve(node, run.turn.bot.attributes, run.turn.human.attributes)
            if isinstance(reserved, str):
                return Skip(reserved)
            run.reservations[node.name] = reserved
        return None

    async def _call(self, run: _Run, node: ServiceNode, start: float) -> None:
        timeout = node.config.connector.timeout
        end = CallEnd()
        try:  # (what ``contained`` does, without a with block's calls on every call)
            with time_limit(timeout):
                reservation = run.reservations.get(node.name)
                view = run.view(node, reservation.allowance if reservation else None)
                if node.config.stream:
                    output = await self._streamed(run, node, view)
                else:
                    batcher = self._batchers[node.name]
                    if batcher.batch_size == 1:  # the batcher's own path, one frame less
                        (output,) = await batcher.connector.call([view])
                    else:
                        output, end.batch = await batcher.submit(view)
            self._apply(run, node, output, view)
        except Exception as exc:  # a cancellation goes on up
            end.failure = failure_of(node.name, exc, lambda: f"no answer within {timeout}s")
        if end.failure is None:
            run.ok.add(node.name)
        run.trace.ended(node.name, node.role, start, end)

    async def _streamed(self, run: _Run, node: ServiceNode, view: DialogView) -> Any:
        """A streaming skill's output, called alone (never batched); its tokens go to the
        turn's listener once its answer is certain to be chosen (:meth:`_release`), those
        that came before then at that moment. The output is the same ``end`` list a JSON
        call returns, so the stored turn does not depend on it."""
        connector = self._batchers[node.name].connector
        stream = Streaming(node.name, run.turn.events)
        run.streams[node.name] = stream
        output: Any = None
        lines = connector.stream(view)
        try:
            async for part, value in lines:
                if part == "token" and value:
                    self._count_piece(run, node, view.max_tokens)
                if part == "start":
                    announced = value.get("confidence") if isinstance(value, dict) else None
                    if isinstance(announced, int | float):
                        stream.confidence = float(announced)
                    if self._claims(run, node, value):
                        stream.sure = True
                    self._release(run)
                elif part == "token" and value:
                    if stream.offer(value):
                        # the client's write first: reading the next piece goes down the
                        # connector's and the skill's layers to a socket that has nothing
                        await asyncio.sleep(0)
                elif part == "end":
                    output = value
        except BaseException:
            del run.streams[node.name]  # a failed or dropped answer's tokens are not sent
            raise
        finally:
            close = getattr(lines, "aclose", None)  # a stream cut short closes its connection
            if close is not None:
                await close()
        # Kept: tokens still held go out if the answer becomes sure after it is complete.
        return output

    @staticmethod
    def _count_piece(run: _Run, node: ServiceNode, allowance: int | None) -> None:
        """Count a streamed piece; a stream past its token allowance is cut (the skill did
        not keep to the ``max_tokens`` it was told)."""
        pieces = run.streamed[node.name] = run.streamed.get(node.name, 0) + 1
        if allowance is not None and pieces > allowance:
            raise RefusedOutput(
                node.name, f"streamed past its token allowance of {allowance}: cut off"
            )

    def _release(self, run: _Run) -> None:
        """Let each streaming skill whose answer has become certain pass its tokens on."""
        for name, stream in list(run.streams.items()):
            if name in run.done and all(h.skill_name != name for h in run.utterance.hypotheses):
                del run.streams[name]  # its answer was lost: its tokens are not sent
                continue
            if stream.events.listened and not stream.sure:
                stream.sure = self._certain(run, self._skills[name], stream.confidence)
            if stream.sure:
                stream.flush()

    def _claims(self, run: _Run, node: ServiceNode, start: Any) -> bool:
        """Whether this skill's start line claims the turn's answer: it announces at least
        its ``stream_min_confidence``, and no other skill claimed it before."""
        rule = node.config.stream_min_confidence
        announced = start.get("confidence") if isinstance(start, dict) else None
        if rule is None or run.claimed is not None or not isinstance(announced, int | float):
            return False
        if announced < rule:
            return False
        run.claimed = (
            node.name,
            f"{node.name} announced confidence {announced:g}, at least its "
            f"stream_min_confidence {rule:g}",
        )
        return True

    def _claimed(self, run: _Run) -> Selection | None:
        """The claiming skill's hypothesis as the turn's choice, if it gave one."""
        if run.claimed is None:
            return None
        name, reason = run.claimed
        for index, hypothesis in enumerate(run.utterance.hypotheses):
            if hypothesis.skill_name == name:
                return Selection(index=index, reason=reason)
        return None

    def _certain(self, run: _Run, node: ServiceNode, confidence: float | None) -> bool:
        """Whether this skill's answer will be the turn's, as far as can be known while it
        is written: no other skill has a hypothesis, but for those of lower tiers below
        both its ``run_below`` (they are why it runs) and the confidence it announced, and
        every other skill still to answer is left out (by the skill selectors, or as a
        tier this answer's confidence keeps from running). Its answer can still be lost
        (the skill fails, a candidate annotator holds it back): the final answer, not the
        tokens, is what is stored."""
        for other in self.pipeline.services_of("skills"):
            if other.name == node.name:
                continue
            if other.name in run.done:
                # Below the run_below that called this skill in, a lower tier's answer is
                # not a rival: it is why this one runs.
                bar = node.config.run_below if other.config.tier < node.config.tier else None
                if any(
                    h.skill_name == other.name
                    and (bar is None or confidence is None or h.confidence >= min(bar, confidence))
                    for h in run.utterance.hypotheses
                ):
                    return False
                continue
            if self._not_selected(run, other):
                continue
            threshold = other.config.run_below
            if (
                other.config.tier > node.config.tier
                and threshold is not None
                and confidence is not None
                and confidence >= threshold
            ):
                continue
            return False
        return True

    @staticmethod
    def _not_selected(run: _Run, node: ServiceNode) -> bool:
        return bool(
            run.selected
            and node.name not in run.selected
            and (run.decided is None or node.name in run.decided)
        )

    def _apply(self, run: _Run, node: ServiceNode, output: Any, view: DialogView) -> None:
        """Write the output into the service's own slot, and nowhere else, once it is known
        to be storable (:mod:`agent.state.storage_limits`) within the turn's document budget."""
        utterance = run.utterance
        run.stored_bytes = self._limits.charge(node.name, output, run.stored_bytes)
        run.changed()
        try:
            if node.role == "annotators":
                utterance.annotations[node.name] = output
            elif node.role == "skill_selectors":
                chosen = outputs.selected_skills(node.name, output)
                run.selected.update(chosen.skills)
                run.decided = (
                    None
                    if run.decided is None or chosen.decides is None
                    else run.decided | set(chosen.decides)
                )
                utterance.skill_selection.append(
                    SkillSelectorDecision(selector=node.name, **chosen.model_dump())
                )
            elif node.role == "skills":
                hypotheses = outputs.skill_hypotheses(node.name, output)
                utterance.hypotheses.extend(hypotheses)
                utterance.hypotheses.sort(key=lambda h: run.skill_order[h.skill_name])
                used = sum([h.tokens_used() for h in hypotheses])
                if used:
                    run.tokens[node.name] = run.tokens.get(node.name, 0) + used
                self._drop_outrun(run)
            elif node.role == "candidate_annotators":
                shown = view.human_utterance.hypotheses
                notes = outputs.candidate_annotations(node.name, output, len(shown))
                for hypothesis, note in zip(utterance.hypotheses, notes, strict=False):
                    slot = WriteOnce(hypothesis.annotations)
                    slot[node.name] = note
                    hypothesis.annotations = slot
            elif node.role == "response_selectors":
                run.selection = outputs.selection(node.name, output, len(utterance.hypotheses))
            elif node.role == "response_annotators":
                assert run.bot_utterance is not None
                run.bot_utterance.annotations[node.name] = output
        except KeyWrittenTwice as exc:
            raise RefusedOutput(node.name, f"{exc.key!r} was already written this turn") from None

    def _answer(self, run: _Run) -> BotUtterance:
        """The bot utterance: the selector's choice, the most confident one if the selector
        gave none, or the configured fallback when no hypothesis survived."""
        hypotheses = run.utterance.hypotheses
        if not hypotheses:
            return BotUtterance(
                text=self.pipeline.fallback_response,
                orig_text=None,
                active_skill=FALLBACK_SKILL,
                confidence=0.0,
                user=run.turn.bot.model_dump(mode="json"),
                attributes={"selector_reason": "no hypothesis survived"},
            )
        if run.selection is None:
            run.selection = self._claimed(run)
        if run.selection is None:
            run.selection = highest_confidence([h.confidence for h in hypotheses])
            if self.pipeline.services_of("response_selectors"):
                run.selection.reason = f"selector gave no choice; {run.selection.reason}"
        chosen = hypotheses[run.selection.index]
        attributes: dict[str, Any] = (
            {"selector_reason": run.selection.reason} if run.selection.reason else {}
        )
        # The sources an answer cites (the knowledge and LLM skills' [1], [2]) travel with
        # it: the reply's attributes, which /chat shows as links (docs/knowledge.md).
        citations = (chosen.model_extra or {}).get(CITATIONS)
        if isinstance(citations, list) and citations:
            attributes[CITATIONS] = citations
        return BotUtterance(
            text=chosen.text,
            orig_text=chosen.text,
            active_skill=chosen.skill_name,
            confidence=chosen.confidence,
            user=run.turn.bot.model_dump(mode="json"),
            attributes=attributes,
        )
