"""Several pipelines replayed over the same turns, side by side, with a noise run.

A candidate's changes mean little without the changes nothing explains: an LLM skill that
answers otherwise each time, a service whose content moved on. The noise run replays the
baseline pipeline (the one that answered) against itself over the same turns; what it
changes is that noise. Each candidate is then read against it: how many of its changed
turns the noise run answered as stored, i.e. changes the candidate made rather than
found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from agent.cli.replay.analysis import changed
from agent.cli.replay.compare import LabelCounts, Summary, TurnDiff
from agent.cli.replay.report import Context, page, run_body


@dataclass(slots=True)
class Run:
    """One pipeline's replay of the chosen turns."""

    summary: Summary
    diffs: list[TurnDiff]
    #: its file against the baseline's, and where the inspector is
    context: Context


def beyond_noise(diffs: Sequence[TurnDiff], noise: Sequence[TurnDiff]) -> int:
    """The turns of ``diffs`` that changed while the noise run answered them as stored
    (a turn the noise run did not reach counts as changed beyond it)."""
    noisy = {diff.utt_id for diff in noise if changed(diff)}
    return sum(changed(diff) and diff.utt_id not in noisy for diff in diffs)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _share(count: int, share: float) -> str:
    return f"{share:.1%} ({count})"


def rows(summaries: Sequence[Summary]) -> list[tuple[str, list[str]]]:
    """The figures of each run, one row a figure, one column a run."""
    found = [
        ("turns replayed", [str(s.turns) for s in summaries]),
        ("skill changed", [_share(s.skill_changed, s.skill_changed_share) for s in summaries]),
        (
            "response changed",
            [_share(s.response_changed, s.response_changed_share) for s in summaries],
        ),
    ]
    if any(s.changed_beyond_noise is not None for s in summaries):
        found.append(
            (
                "changed beyond noise",
                [
                    "" if s.noise or s.changed_beyond_noise is None else str(s.changed_beyond_noise)
                    for s in summaries
                ],
            )
        )
    found += label_rows(summaries)
    found += [
        ("fallbacks", [str(s.candidate.fallbacks) for s in summaries]),
        ("turns with errors", [str(s.candidate.turns_with_errors) for s in summaries]),
        ("latency p50", [_ms(s.candidate.latency_p50) for s in summaries]),
        ("latency p95", [_ms(s.candidate.latency_p95) for s in summaries]),
    ]
    return found


def label_rows(summaries: Sequence[Summary]) -> list[tuple[str, list[str]]]:
    """With labelled turns, the rows that judge each run by them: how many labelled
    turns fit, stored and replayed, and the changed turns that now fit, or no longer do."""
    if all(s.labels is None for s in summaries):
        return []

    def cells(figure: Callable[[LabelCounts], str]) -> list[str]:
        return ["" if s.labels is None else figure(s.labels) for s in summaries]

    return [
        ("fit label, stored", cells(lambda c: f"{c.stored_fit} of {c.labelled}")),
        ("fit label, replayed", cells(lambda c: f"{c.candidate_fit} of {c.labelled}")),
        ("changed, now fit", cells(lambda c: str(c.now_fit))),
        ("changed, no longer fit", cells(lambda c: str(c.no_longer_fit))),
    ]


def name(summary: Summary) -> str:
    return f"noise: {summary.pipeline}" if summary.noise else summary.pipeline


def text_table(summaries: Sequence[Summary]) -> str:
    """The side-by-side figures as a plain-text table, for standard output."""
    names = [name(s) for s in summaries]
    width = max([14, *(len(n) + 2 for n in names)])
    lines = [f"{'':<21}" + "".join(f"{n:>{width}}" for n in names)]
    lines += [
        f"{label:<21}" + "".join(f"{cell:>{width}}" for cell in cells)
        for label, cells in rows(summaries)
    ]
    return "\n".join(lines)


def html_page(runs: Sequence[Run]) -> str:
    """One page: the runs' figures side by side, then each run's report, collapsed."""
    summaries = [run.summary for run in runs]
    head = "".join(f"<th>{escape(name(s))}</th>" for s in summaries)
    body = "".join(
        f"<tr><th>{escape(label)}</th>"
        + "".join(f'<td class="num">{escape(cell)}</td>' for cell in cells)
        + "</tr>"
        for label, cells in rows(summaries)
    )
    table = (
        f'<section id="side-by-side"><h2>Side by side</h2>'
        f"<table><tr><th></th>{head}</tr>{body}</table></section>"
    )
    details = "".join(
        f'<details class="run" id="run{number}"><summary>{escape(name(run.summary))}</summary>'
        f"{run_body(run.summary, run.diffs, run.context, f'run{number}-')}</details>"
        for number, run in enumerate(runs)
    )
    intro = (
        '<p class="muted">The same stored turns run through each pipeline, each compared '
        "with what the stored pipeline answered; the noise run is the baseline replayed "
        "against itself.</p>"
    )
    return page(", ".join(name(s) for s in summaries), intro, table + details)
