"""``chorus eval`` and ``chorus export-parlai``: ParlAI datasets against a running agent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.parlai.formats import DatasetError, read_episodes, write_episodes
from agent.parlai.replay import (
    SCORES,
    EvalReport,
    ReplayError,
    dialog_episode,
    evaluate,
    fetch_dialogs,
)

console = Console()
UrlOption = Annotated[str, typer.Option(metavar="URL", help="The address of the running agent.")]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="CHORUS_API_KEY",
        metavar="KEY",
        help="The agent's API key, sent as X-API-Key; needed when the agent sets "
        "CHORUS_API_KEY, as docker compose always does.",
    ),
]
REFUSED = (401, 403)


def _headers(api_key: str | None) -> dict[str, str]:
    return {"X-API-Key": api_key} if api_key else {}


def _refused_hint(status: int, api_key: str | None) -> str:
    """What to do about a 401/403: send the key, or check the one sent."""
    if status not in REFUSED:
        return ""
    return (
        " (the agent wants its API key: pass --api-key or set CHORUS_API_KEY)"
        if not api_key
        else " (is --api-key / CHORUS_API_KEY the agent's key?)"
    )


def _table(report: EvalReport) -> Table:
    table = Table(title="Evaluation")
    for column in ("episode", "turns", "scored", *SCORES):
        table.add_column(column, justify="left" if column == "episode" else "right")
    for row in [*report.episodes, report.overall]:
        table.add_row(
            row.name,
            str(row.turns),
            str(row.scored),
            *(f"{getattr(row, m):.3f}" for m in SCORES),
            style="bold" if row is report.overall else None,
        )
    return table


def eval_command(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="The dataset: ParlAI's text format (.txt) or JSONL (.jsonl).",
            exists=True,
            dir_okay=False,
        ),
    ],
    url: UrlOption = "http://127.0.0.1:4242",
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="PATH", help="Also write the report to PATH, as JSON."),
    ] = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Replay a ParlAI dataset through the agent and score the answers.

    Every episode of FILE is played as one dialog, and its scores are printed per episode
    and overall.

    An agent that protects its chat (CHORUS_PROTECT_CHAT) needs its API key: --api-key or
    CHORUS_API_KEY.
    """
    try:
        episodes = read_episodes(file)
    except DatasetError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    turns = sum(len(e) for e in episodes)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    try:
        with httpx.Client(base_url=url, timeout=60, headers=_headers(api_key)) as client, progress:
            task = progress.add_task(f"{len(episodes)} episodes", total=turns)
            report = evaluate(episodes, client, on_turn=lambda: progress.advance(task))
    except (httpx.TransportError, RuntimeError) as exc:
        hint = _refused_hint(exc.status, api_key) if isinstance(exc, ReplayError) else ""
        console.print(f"[red]error:[/red] {exc}{hint}", highlight=False)
        raise typer.Exit(1) from None
    console.print(_table(report))
    if json_out is not None:
        json_out.write_text(report.model_dump_json(indent=2))


def export_command(
    out: Annotated[
        Path,
        typer.Argument(
            metavar="OUT", help="The file to write: JSONL if it ends in .jsonl, else text."
        ),
    ],
    user: Annotated[
        list[str] | None,
        typer.Option(metavar="ID", help="Export every dialog of this user; may be repeated."),
    ] = None,
    dialog: Annotated[
        list[str] | None,
        typer.Option(metavar="ID", help="Export this dialog; may be repeated."),
    ] = None,
    url: UrlOption = "http://127.0.0.1:4242",
    api_key: ApiKeyOption = None,
) -> None:
    """Write stored dialogs as a ParlAI dataset.

    Each human text becomes an example labelled with the bot's answer.

    Reading dialogs needs the agent's API key when it sets one (--api-key or CHORUS_API_KEY).
    """
    if not user and not dialog:
        console.print("[red]error:[/red] name at least one --user or --dialog")
        raise typer.Exit(2)
    try:
        with httpx.Client(base_url=url, timeout=60, headers=_headers(api_key)) as client:
            dialogs = fetch_dialogs(client, user or [], dialog or [])
    except httpx.HTTPStatusError as exc:
        hint = _refused_hint(exc.response.status_code, api_key)
        console.print(
            f"[red]error:[/red] {exc.request.url}: {exc.response.status_code} "
            f"{exc.response.text[:200]}{hint}",
            highlight=False,
        )
        raise typer.Exit(1) from None
    except httpx.TransportError as exc:
        console.print(f"[red]error:[/red] cannot reach the agent at {url}: {exc}")
        raise typer.Exit(1) from None
    episodes = [e for e in (dialog_episode(d) for d in dialogs) if e]
    lines = write_episodes(episodes, out)
    console.print(f"wrote {len(episodes)} episodes, {lines} examples to {out}")
