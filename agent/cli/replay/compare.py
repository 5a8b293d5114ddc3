"""What a replayed turn changed, and the summary of a replay.

Both sides of a comparison are read the same way: the stored side from the stored turn,
the candidate's from the turn the candidate pipeline just ran. A turn's latency is the
length of its trace (the last service call's end, in seconds since the pipeline started),
as the inspector draws it, so the two are measured alike; the candidate's are taken on
this machine, at ``--concurrency`` turns at once, which the stored ones were not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from agent.state.models import FALLBACK_SKILL, BotUtterance, HumanUtterance, ServiceCall


class Side(BaseModel):
    """What one pipeline did with a turn."""

    skill: str = Field(description="the skill whose answer was chosen (fallback_response: none)")
    response: str
    confidence: float
    fallback: bool = Field(description="no hypothesis survived: the fallback response")
    errors: list[str] = Field(description="each failed service, as 'service: kind'")
    latency: float = Field(description="seconds, from the turn's trace")
    services: dict[str, float] = Field(
        default_factory=dict, description="seconds each service's calls took, from the trace"
    )


class TurnDiff(BaseModel):
    """One line of ``--out``: a stored turn and what the candidate made of it."""

    dialog_id: str
    user_id: str
    turn: int = Field(description="the turn's place in its dialog, from 1")
    utt_id: str
    date_time: datetime
    text: str = Field(description="what the user said")
    stored: Side
    candidate: Side
    skill_changed: bool
    response_changed: bool
    rating: float | None = Field(default=None, description="the stored answer's rating")
    dialog_rating: float | None = Field(default=None, description="the dialog's rating")
    pipeline: str | None = Field(
        default=None, description="the run's pipeline, when several were replayed"
    )
    guessed: list[str] = Field(
        default_factory=list,
        description="parts of the state the store did not keep as they were (user, bot), "
        "taken as they are now",
    )
    label: list[str] | None = Field(
        default=None, description="the skills that may answer the turn (--labels, or stored)"
    )
    stored_fits: bool | None = Field(
        default=None, description="with a label: the stored answer's skill fits it"
    )
    candidate_fits: bool | None = Field(
        default=None, description="with a label: the candidate's skill fits it"
    )


def trace_latency(trace: Sequence[ServiceCall]) -> float:
    """The turn's length as its trace shows it: the end of its last service call."""
    return max((call.start + call.duration for call in trace), default=0.0)


def service_latencies(trace: Sequence[ServiceCall]) -> dict[str, float]:
    """The seconds each service's calls took in the turn (a service called twice: both)."""
    spent: dict[str, float] = {}
    for call in trace:
        spent[call.service] = spent.get(call.service, 0.0) + call.duration
    return spent


def side_of(human: HumanUtterance, bot: BotUtterance) -> Side:
    return Side(
        skill=bot.active_skill,
        response=bot.text,
        confidence=bot.confidence,
        fallback=bot.active_skill == FALLBACK_SKILL,
        errors=[f"{failure.service}: {failure.kind}" for failure in human.errors],
        latency=trace_latency(human.trace),
        services=service_latencies(human.trace),
    )


def compared(
    *,
    dialog_id: str,
    user_id: str,
    number: int,
    human: HumanUtterance,
    stored: Side,
    candidate: Side,
    guessed: list[str],
    rating: float | None = None,
    dialog_rating: float | None = None,
    label: list[str] | None = None,
) -> TurnDiff:
    return TurnDiff(
        dialog_id=dialog_id,
        user_id=user_id,
        turn=number,
        utt_id=human.utt_id,
        date_time=human.date_time,
        text=human.text,
        stored=stored,
        candidate=candidate,
        skill_changed=stored.skill != candidate.skill,
        response_changed=stored.response != candidate.response,
        guessed=guessed,
        rating=rating,
        dialog_rating=dialog_rating,
        label=label,
    )


class Totals(BaseModel):
    """One pipeline's figures over the replayed turns."""

    fallbacks: int
    fallback_share: float
    turns_with_errors: int
    errors: int
    latency_p50: float = Field(description="seconds")
    latency_p95: float = Field(description="seconds")
    skills: dict[str, int] = Field(description="turns answered per skill")


class LabelCounts(BaseModel):
    """A run's labelled turns, and whether the candidate made them fit."""

    labelled: int = Field(description="replayed turns with a label")
    stored_fit: int = Field(description="labelled turns whose stored answer fits its label")
    candidate_fit: int = Field(description="labelled turns whose candidate answer fits")
    now_fit: int = Field(description="changed turns that fit their label only now")
    no_longer_fit: int = Field(description="changed turns that fitted their label only before")


class Summary(BaseModel):
    """What ``chorus replay`` prints at the end, and the top of its HTML report."""

    pipeline: str
    turns: int
    selected: int = Field(description="turns chosen for the replay")
    with_person: int = Field(
        default=0,
        description="messages of the chosen dialogs a person answered while the dialog was "
        "handed off: never replayed, since no skill saw them (docs/handoff.md)",
    )
    interrupted: bool = Field(description="stopped by Ctrl-C before every turn was replayed")
    skill_changed: int
    skill_changed_share: float
    response_changed: int
    response_changed_share: float
    stored: Totals
    candidate: Totals
    noise: bool = Field(
        default=False, description="this run is the baseline pipeline replayed against itself"
    )
    changed_beyond_noise: int | None = Field(
        default=None,
        description="with a noise run: the changed turns whose noise run answered as stored",
    )
    labels: LabelCounts | None = Field(
        default=None, description="with labelled turns: how many fit, before and after"
    )


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (0 for no values): a value that was measured."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(int(-(-share * len(ordered) // 1)), 1)  # ceil(share * n), at least 1
    return ordered[min(rank, len(ordered)) - 1]


def _totals(sides: Sequence[Side]) -> Totals:
    count = len(sides)
    fallbacks = sum(side.fallback for side in sides)
    latencies = [side.latency for side in sides]
    return Totals(
        fallbacks=fallbacks,
        fallback_share=fallbacks / count if count else 0.0,
        turns_with_errors=sum(bool(side.errors) for side in sides),
        errors=sum(len(side.errors) for side in sides),
        latency_p50=percentile(latencies, 0.5),
        latency_p95=percentile(latencies, 0.95),
        skills=dict(Counter(side.skill for side in sides).most_common()),
    )


def summarise(
    diffs: Sequence[TurnDiff],
    *,
    pipeline: str,
    selected: int,
    interrupted: bool,
    with_person: int = 0,
) -> Summary:
    count = len(diffs)
    skill = sum(diff.skill_changed for diff in diffs)
    response = sum(diff.response_changed for diff in diffs)
    return Summary(
        pipeline=pipeline,
        turns=count,
        selected=selected,
        with_person=with_person,
        interrupted=interrupted,
        skill_changed=skill,
        skill_changed_share=skill / count if count else 0.0,
        response_changed=response,
        response_changed_share=response / count if count else 0.0,
        stored=_totals([diff.stored for diff in diffs]),
        candidate=_totals([diff.candidate for diff in diffs]),
    )
