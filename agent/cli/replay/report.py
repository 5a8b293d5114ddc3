"""The replay's HTML report: one self-contained page (no script, no file beside it, nothing
fetched) to look at rather than read.

At the top, the summary as before/after figures. Then a strip with one cell per replayed
turn, in the order of the dialogs and their turns, coloured by what changed: the changed
ones stand out at a glance, and each links to its row. Then the changed turns, the stored
answer and the candidate's side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from agent.cli.replay.compare import Side, Summary, TurnDiff

#: Changed turns shown in the table; the JSON Lines file (--out) has all of them.
MAX_ROWS = 2000

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
"""


def _kind(diff: TurnDiff) -> str:
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


def _strip(diffs: Sequence[TurnDiff]) -> str:
    cells = []
    for index, diff in enumerate(diffs):
        kind = _kind(diff)
        title = f"{diff.dialog_id} turn {diff.turn}: {diff.stored.skill} → {diff.candidate.skill}"
        target = f' href="#t{index}"' if kind != "same" else ""
        cells.append(f'<a class="{kind}"{target} title="{escape(title)}"></a>')
    return f'<div class="strip">{"".join(cells)}</div>'


def _answer(side: Side) -> str:
    errors = (
        f'<div class="muted">errors: {escape(", ".join(side.errors))}</div>' if side.errors else ""
    )
    return (
        f'<td class="answer"><span class="skillname">{escape(side.skill)} · '
        f"{side.confidence:.2f}</span><br>{escape(side.response)}{errors}</td>"
    )


def _changed_rows(diffs: Sequence[TurnDiff]) -> str:
    rows, shown = [], 0
    for index, diff in enumerate(diffs):
        if _kind(diff) == "same":
            continue
        shown += 1
        if shown > MAX_ROWS:
            break
        rows.append(
            f'<tr id="t{index}"><td>{escape(diff.user_id)}, turn {diff.turn}<br>'
            f'<span class="skillname muted">{escape(diff.dialog_id)}</span></td>'
            f"<td>{escape(diff.text)}</td>"
            f"{_answer(diff.stored)}{_answer(diff.candidate)}</tr>"
        )
    if not rows:
        return '<p class="muted">No turn changed.</p>'
    more = (
        f'<p class="muted">The first {MAX_ROWS} changed turns; --out has every turn.</p>'
        if shown > MAX_ROWS
        else ""
    )
    head = "<tr><th>user, turn</th><th>user said</th><th>stored answer</th><th>candidate</th></tr>"
    return f"{more}<table>{head}{''.join(rows)}</table>"


def html_report(summary: Summary, diffs: Sequence[TurnDiff]) -> str:
    """The page for ``summary`` and the turns behind it, ordered by dialog and turn."""
    ordered = sorted(diffs, key=lambda d: (d.date_time, d.dialog_id, d.turn))
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
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>chorus replay: {escape(summary.pipeline)}</title><style>{_STYLE}</style>"
        f"</head><body><h1>Replay of {escape(summary.pipeline)}</h1>"
        f'<p class="muted">The stored turns run through the candidate pipeline, compared '
        f"with what the stored pipeline answered.</p>{stopped}"
        f'<div class="cards">{_cards(summary)}</div>{_figures(summary)}'
        f"<h2>Turns</h2>{legend}{_strip(ordered)}"
        f"<h2>Changed turns</h2>{_changed_rows(ordered)}</body></html>\n"
    )
