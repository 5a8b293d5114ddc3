"""The replay's HTML report: one self-contained page (no script, no file beside it, nothing
fetched) to look at rather than read.

At the top, the summary as before/after figures, and what the candidate's file changes.
Then what decides whether the changes are better: where the answers moved from skill to
skill, with the confidence of both sides and the ratings users gave the stored answers,
and each service's latency. Then a strip with one cell per replayed turn, coloured by what
changed, and the changed turns grouped by what the user said, each group collapsed and
linking its dialogs to the agent's inspector. A large run stays one page a reader can
scroll: only the largest groups and the first turns of each are on it, with a count of
the rest (``--out`` has every turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from statistics import fmean
from urllib.parse import quote

from agent.cli.replay.analysis import (
    Group,
    Transition,
    by_what_was_said,
    changed,
    service_latency,
    transitions,
)
from agent.cli.replay.compare import Side, Summary, TurnDiff
from agent.cli.replay.config_diff import Change

#: Groups of changed turns on the page, the largest first; the JSON Lines file (--out)
#: has every turn.
MAX_GROUPS = 100
#: Turns shown in a group; the group's heading counts them all.
MAX_GROUP_ROWS = 20


@dataclass(frozen=True, slots=True)
class Context:
    """What the page says besides the turns: the file the candidate is compared with and
    how it differs (None: no baseline file was read), and where the agent's inspector is."""

    baseline: str | None = None
    changes: list[Change] = field(default_factory=list)
    agent_url: str = ""


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem; color: #1d2430; }
h1 { font-size: 1.4rem; margin: 0 0 .3rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
.muted { color: #667085; }
.cards { display: flex; gap: 1rem; flex-wrap: wrap; margin: 1rem 0; }
.card { border: 1px solid #d0d5dd; border-radius: 8px; padding: .7rem 1rem; min-width: 10rem; }
.card b { display: block; font-size: 1.5rem; }
table { border-collapse: collapse; }
td, th { border-bottom: 1px solid #e4e7ec; padding: .35rem .6rem; text-align: left;
  vertical-align: top; }
th { background: #f2f4f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.strip { display: flex; flex-wrap: wrap; gap: 2px; max-width: 70rem; }
.strip a { width: 10px; height: 18px; border-radius: 2px; display: block; }
.same { background: #d0d5dd; } .response { background: #f79009; } .skill { background: #d92d20; }
.interrupted { color: #b42318; font-weight: 600; }
.answer { max-width: 28rem; white-space: pre-wrap; }
.skillname { font-family: ui-monospace, monospace; font-size: 12px; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 .3rem 0 1rem; }
details { border: 1px solid #e4e7ec; border-radius: 6px; margin: .4rem 0; padding: .3rem .6rem; }
summary { cursor: pointer; } code { font-family: ui-monospace, monospace; font-size: 12px; }
"""


def _what_changed(diff: TurnDiff) -> str:
    if diff.skill_changed:
        return "skill"
    return "response" if diff.response_changed else "same"


def _share(value: float) -> str:
    return f"{value:.1%}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _cards(summary: Summary) -> str:
    cards = [
        ("turns replayed", f"{summary.turns}" + ("" if not summary.interrupted else " (partial)")),
        ("skill changed", f"{_share(summary.skill_changed_share)} ({summary.skill_changed})"),
        (
            "response changed",
            f"{_share(summary.response_changed_share)} ({summary.response_changed})",
        ),
    ]
    if summary.labels is not None:
        cards += [
            ("changed, now fit their label", str(summary.labels.now_fit)),
            ("changed, no longer fit it", str(summary.labels.no_longer_fit)),
        ]
    return "".join(
        f'<div class="card">{escape(label)}<b>{escape(value)}</b></div>' for label, value in cards
    )


def _figures(summary: Summary) -> str:
    before, after = summary.stored, summary.candidate
    rows = [
        ("fallbacks", f"{before.fallbacks} ({_share(before.fallback_share)})",
         f"{after.fallbacks} ({_share(after.fallback_share)})"),
        ("turns with errors", str(before.turns_with_errors), str(after.turns_with_errors)),
        ("service errors", str(before.errors), str(after.errors)),
        ("latency p50", _ms(before.latency_p50), _ms(after.latency_p50)),
        ("latency p95", _ms(before.latency_p95), _ms(after.latency_p95)),
    ]  # fmt: skip
    if summary.labels is not None:
        total = summary.labels.labelled
        rows.append(("fit their label", f"{summary.labels.stored_fit} of {total}",
                     f"{summary.labels.candidate_fit} of {total}"))  # fmt: skip
    skills = sorted(set(before.skills) | set(after.skills))
    rows += [
        (f"answered by {skill}", str(before.skills.get(skill, 0)), str(after.skills.get(skill, 0)))
        for skill in skills
    ]
    body = "".join(
        f'<tr><th>{escape(name)}</th><td class="num">{escape(stored)}</td>'
        f'<td class="num">{escape(candidate)}</td></tr>'
        for name, stored, candidate in rows
    )
    return f"<table><tr><th></th><th>stored</th><th>candidate</th></tr>{body}</table>"


def _strip(diffs: Sequence[TurnDiff], anchors: dict[str, str]) -> str:
    """One cell per turn; a changed one says what changed and links to its group. An
    unchanged one says nothing more: with thousands of turns, titles on every cell would
    weigh more than the rest of the page."""
    cells = []
    for diff in diffs:
        what = _what_changed(diff)
        if what == "same":
            cells.append('<a class="same"></a>')
            continue
        title = f"{diff.dialog_id} turn {diff.turn}: {diff.stored.skill} → {diff.candidate.skill}"
        anchor = anchors.get(diff.utt_id)
        target = f' href="#{anchor}"' if anchor is not None else ""
        cells.append(f'<a class="{what}"{target} title="{escape(title)}"></a>')
    return f'<div class="strip">{"".join(cells)}</div>'


def _answer(side: Side) -> str:
    errors = (
        f'<div class="muted">errors: {escape(", ".join(side.errors))}</div>' if side.errors else ""
    )
    return (
        f'<td class="answer"><span class="skillname">{escape(side.skill)} · '
        f"{side.confidence:.2f}</span><br>{escape(side.response)}{errors}</td>"
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int) -> str:
    """A table of escaped cells, those from column ``numeric_from`` on right-aligned."""
    header = "".join(f"<th>{escape(cell)}</th>" for cell in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(cell)}</td>' if column >= numeric_from else
            f"<td>{escape(cell)}</td>"
            for column, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )  # fmt: skip
    return f"<table><tr>{header}</tr>{body}</table>"


def _config(context: Context) -> str:
    if context.baseline is None:
        return '<p class="muted">No baseline pipeline file was read (--baseline).</p>'
    said = f'<p class="muted">Against {escape(context.baseline)}.</p>'
    if not context.changes:
        return f"{said}<p>The candidate's file is the same.</p>"
    rows = [(c.path, c.baseline, c.candidate) for c in context.changes]
    return said + _table(("setting", "baseline", "candidate"), rows, 3)


def _transitions(moved: Sequence[Transition]) -> str:
    if not moved:
        return '<p class="muted">No turn changed.</p>'
    rows = [(t.stored, t.candidate, str(t.turns)) for t in moved]
    return _table(("stored skill", "candidate's skill", "turns"), rows, 2)


def _confidence(moved: Sequence[Transition]) -> str:
    if not moved:
        return '<p class="muted">No turn changed.</p>'
    rows = [
        (
            f"{t.stored} → {t.candidate}",
            str(t.turns),
            f"{t.stored_confidence:.2f}",
            f"{t.candidate_confidence:.2f}",
            str(t.rose),
            str(t.fell),
        )
        for t in moved
    ]
    head = ("changed turns", "turns", "stored, mean", "candidate, mean", "rose", "fell")
    return _table(head, rows, 1)


def _ratings(diffs: Sequence[TurnDiff], moved: Sequence[Transition]) -> str:
    changes = [d for d in diffs if changed(d)]
    rated = [d.rating for d in changes if d.rating is not None]
    dialogs = [d.dialog_rating for d in changes if d.dialog_rating is not None]
    mean = f", {fmean(rated):.2f} on average" if rated else ""
    lines = (
        f"<p>{len(rated)} of {len(changes)} changed turns have a rated stored answer{mean}; "
        f"{len(dialogs)} are in a rated dialog"
        + (f" ({fmean(dialogs):.2f} on average)" if dialogs else "")
        + ".</p>"
    )
    rows = [
        (f"{t.stored} → {t.candidate}", str(len(t.ratings)), f"{fmean(t.ratings):.2f}")
        for t in moved
        if t.ratings
    ]
    if not rows:
        return lines
    return lines + _table(("changed turns", "rated answers", "mean rating"), rows, 1)


def _latency(diffs: Sequence[TurnDiff]) -> str:
    before, after = service_latency(diffs, "stored"), service_latency(diffs, "candidate")
    if not before and not after:
        return '<p class="muted">No service call was traced.</p>'
    rows = []
    for service in sorted(before.keys() | after.keys()):
        row = [service]
        for side in (before.get(service), after.get(service)):
            row += ["0", "", ""] if side is None else [
                str(side.turns), _ms(side.p50), _ms(side.p95)
            ]  # fmt: skip
        rows.append(row)
    head = ("service", "stored turns", "p50", "p95", "candidate turns", "p50", "p95")
    return _table(head, rows, 1)


def _inspect(diff: TurnDiff, agent_url: str) -> str:
    href = f"{agent_url}/inspect/{quote(diff.dialog_id, safe='')}"
    return f'<a class="inspect" href="{escape(href)}">{escape(diff.user_id)}, turn {diff.turn}</a>'


def _group(number: int, group: Group, agent_url: str, prefix: str) -> str:
    moves: dict[str, int] = {}
    for diff in group.turns:
        move = f"{diff.stored.skill} → {diff.candidate.skill}"
        moves[move] = moves.get(move, 0) + 1
    told = ", ".join(f"{move} {count}" for move, count in moves.items())
    rows = [
        f"<tr><td>{_inspect(diff, agent_url)}"
        + (f"<br>rated {diff.rating:g}" if diff.rating is not None else "")
        + f"</td>{_answer(diff.stored)}{_answer(diff.candidate)}</tr>"
        for diff in group.turns[:MAX_GROUP_ROWS]
    ]
    rest = len(group.turns) - MAX_GROUP_ROWS
    more = f'<p class="muted more">and {rest} more turns</p>' if rest > 0 else ""
    head = "<tr><th>dialog</th><th>stored answer</th><th>candidate</th></tr>"
    return (
        f'<details class="group" id="{prefix}g{number}"><summary>“{escape(group.text)}”: '
        f'<b class="count">{len(group.turns)}</b> turns ({escape(told)})</summary>'
        f"<table>{head}{''.join(rows)}</table>{more}</details>"
    )


def _groups(groups: Sequence[Group], agent_url: str, prefix: str) -> str:
    if not groups:
        return '<p class="muted">No turn changed.</p>'
    shown = [
        _group(number, group, agent_url, prefix) for number, group in enumerate(groups[:MAX_GROUPS])
    ]
    rest = groups[MAX_GROUPS:]
    more = (
        f'<p class="muted more">and {len(rest)} more groups '
        f"({sum(len(g.turns) for g in rest)} turns); --out has every turn.</p>"
        if rest
        else ""
    )
    return "".join(shown) + more


def run_body(
    summary: Summary, diffs: Sequence[TurnDiff], context: Context, prefix: str = ""
) -> str:
    """One replay's part of a page, its ids starting with ``prefix`` (several replays
    share a page), the turns ordered by date, dialog and turn."""
    ordered = sorted(diffs, key=lambda d: (d.date_time, d.dialog_id, d.turn))
    moved, groups = transitions(ordered), by_what_was_said(ordered)
    anchors = {
        diff.utt_id: f"{prefix}g{number}"
        for number, group in enumerate(groups[:MAX_GROUPS])
        for diff in group.turns
    }
    stopped = (
        f'<p class="interrupted">Interrupted: {summary.turns} of {summary.selected} turns '
        "were replayed.</p>"
        if summary.interrupted
        else ""
    )
    legend = (
        '<p class="legend muted">One cell per turn, oldest first:'
        '<span class="same"></span>unchanged<span class="response"></span>response changed'
        '<span class="skill"></span>skill changed</p>'
    )

    def section(name: str, title: str, body: str) -> str:
        return f'<section id="{prefix}{name}"><h2>{escape(title)}</h2>{body}</section>'

    return (
        f'{stopped}<div class="cards">{_cards(summary)}</div>{_figures(summary)}'
        + section("config", "What the candidate changes", _config(context))
        + section("transitions", "Where the changed answers went", _transitions(moved))
        + section("confidence", "Confidence of the changed turns", _confidence(moved))
        + section("ratings", "Ratings of the changed turns", _ratings(ordered, moved))
        + section("latency", "Latency per service", _latency(ordered))
        + f"<h2>Turns</h2>{legend}{_strip(ordered, anchors)}"
        + section(
            "changed",
            "Changed turns, by what the user said",
            _groups(groups, context.agent_url, prefix),
        )
    )


def page(title: str, intro: str, body: str) -> str:
    """A whole page: ``intro`` is HTML already escaped, ``title`` is text."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>chorus replay: {escape(title)}</title><style>{_STYLE}</style>"
        f"</head><body><h1>Replay of {escape(title)}</h1>{intro}{body}</body></html>\n"
    )


def html_report(summary: Summary, diffs: Sequence[TurnDiff], context: Context | None = None) -> str:
    """The page for ``summary`` and the turns behind it."""
    intro = (
        '<p class="muted">The stored turns run through the candidate pipeline, compared '
        "with what the stored pipeline answered.</p>"
    )
    return page(summary.pipeline, intro, run_body(summary, diffs, context or Context()))
