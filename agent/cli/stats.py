"""``chorus stats``: how much the store holds, records per table or collection.

What ``/metrics`` shows as ``chorus_store_records`` once the data lifecycle's sweep has run
a round, readable at any time without an agent: whether retention keeps the store's size
flat, and what an export or an erasure left. With ``--by-arm``, an experiment's results
per arm instead (:mod:`agent.cli.arm_stats`).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from agent.settings import SettingsError, load_settings
from agent.store import StoreUnavailable, open_store

if TYPE_CHECKING:  # scipy takes a while to import: only --by-arm pays for it
    from agent.cli.arm_stats import ArmReport


async def _sizes(db_url: str) -> dict[str, int]:
    store = await open_store(db_url)
    try:
        return await store.lifecycle.sizes()
    finally:
        await store.close()


async def _by_arm(db_url: str, control: str | None, fallback_skill: str) -> ArmReport:
    from agent.cli.arm_stats import arm_report, stored_dialogs

    store = await open_store(db_url)
    try:
        dialogs = [dialog async for dialog in stored_dialogs(store.reader)]
        return arm_report(dialogs, control=control, fallback_skill=fallback_skill)
    finally:
        await store.close()


def stats_command(
    db_url: Annotated[
        str | None,
        typer.Option(help="The store to count (default: CHORUS_DB_URL, as the agent reads it)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    by_arm: Annotated[
        bool,
        typer.Option(
            "--by-arm",
            help="Per experiment arm: dialogs, turns, fallback rate, mean dialog rating with "
            "its 95% interval; then each arm against the reference arm: the difference with "
            "its 95% interval, the lift, an effect size, and the better arm when the evidence "
            "is enough.",
        ),
    ] = False,
    control: Annotated[
        str | None,
        typer.Option(
            help="With --by-arm: the reference arm the others are compared with (default: the "
            "arm named control, else the first by name).",
        ),
    ] = None,
    fallback_skill: Annotated[
        str,
        typer.Option(
            help="With --by-arm: the skill whose answers count as fallbacks, besides the "
            "pipeline's fallback_response.",
        ),
    ] = "fallback",
) -> None:
    """Records per table (SQLite) or collection (MongoDB) of the agent's store, or, with
    --by-arm, an experiment's results per arm. Opening the store brings it to the current
    schema version, as the agent does."""
    try:
        url = db_url or load_settings().db_url
        if by_arm:
            report = asyncio.run(_by_arm(url, control, fallback_skill))
        else:
            sizes = asyncio.run(_sizes(url))
    except (SettingsError, StoreUnavailable, ValueError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if by_arm:
        if as_json:
            typer.echo(report.model_dump_json())
        elif not report.arms:
            typer.echo("no dialogs stored")
        else:
            from agent.cli.arm_stats import format_report

            typer.echo("\n".join(format_report(report)))
        return
    if as_json:
        typer.echo(json.dumps(sizes))
        return
    width = max(map(len, sizes))
    for name, count in sizes.items():
        typer.echo(f"{name:<{width}}  {count:>12,}")
