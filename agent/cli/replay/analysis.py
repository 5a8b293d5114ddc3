"""What the replay's report adds to "what changed": figures to judge a candidate by.

The changed turns are counted by the way their skill moved (``faq → fallback``), grouped
by what the user said (the same question asked by many users changes together), and set
beside what the stored side had been worth: its confidence then and now, and the ratings
users gave the stored answers. Each service's latency is read from the traces of both
sides, so a slower candidate shows which of its services costs the time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean

from agent.cli.replay.compare import TurnDiff, percentile


def changed(diff: TurnDiff) -> bool:
    return diff.skill_changed or diff.response_changed


@dataclass(frozen=True, slots=True)
class Transition:
    """The changed turns whose answer moved from one skill to another (or stayed with
    it, answering otherwise)."""

    stored: str
    candidate: str
    turns: int
    stored_confidence: float
    candidate_confidence: float
    rose: int
    fell: int
    #: the ratings users gave the stored answers of these turns
    ratings: list[float] = field(default_factory=list)


def transitions(diffs: Sequence[TurnDiff]) -> list[Transition]:
    """The changed turns by their skill's move, the most frequent first."""
    moved: dict[tuple[str, str], list[TurnDiff]] = defaultdict(list)
    for diff in diffs:
        if changed(diff):
            moved[(diff.stored.skill, diff.candidate.skill)].append(diff)
    found = [
        Transition(
            stored,
            candidate,
            len(turns),
            fmean(d.stored.confidence for d in turns),
            fmean(d.candidate.confidence for d in turns),
            sum(d.candidate.confidence > d.stored.confidence for d in turns),
            sum(d.candidate.confidence < d.stored.confidence for d in turns),
            [d.rating for d in turns if d.rating is not None],
        )
        for (stored, candidate), turns in moved.items()
    ]
    return sorted(found, key=lambda t: (-t.turns, t.stored, t.candidate))


def said(text: str) -> str:
    """What a user said, as grouped: case and spacing do not tell two questions apart."""
    return " ".join(text.lower().split())


@dataclass(frozen=True, slots=True)
class Group:
    """The changed turns where the users said the same thing."""

    text: str
    turns: list[TurnDiff]


def by_what_was_said(diffs: Sequence[TurnDiff]) -> list[Group]:
    """The changed turns grouped by what the user said, the largest group first."""
    groups: dict[str, list[TurnDiff]] = defaultdict(list)
    for diff in diffs:
        if changed(diff):
            groups[said(diff.text)].append(diff)
    found = [Group(turns[0].text, turns) for turns in groups.values()]
    return sorted(found, key=lambda g: (-len(g.turns), said(g.text)))


@dataclass(frozen=True, slots=True)
class ServiceLatency:
    """One service's calls on one side: in how many turns it was called, and the
    seconds its calls took in a turn, at the median and the 95th percentile."""

    turns: int
    p50: float
    p95: float


def service_latency(diffs: Sequence[TurnDiff], side: str) -> dict[str, ServiceLatency]:
    """Each service's latency on ``side`` (``stored`` or ``candidate``)."""
    spent: dict[str, list[float]] = defaultdict(list)
    for diff in diffs:
        for service, seconds in getattr(diff, side).services.items():
            spent[service].append(seconds)
    return {
        service: ServiceLatency(len(values), percentile(values, 0.5), percentile(values, 0.95))
        for service, values in sorted(spent.items())
    }
