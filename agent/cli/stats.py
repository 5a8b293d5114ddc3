"""``chorus stats``: how much the store holds, records per table or collection.

What ``/metrics`` shows as ``chorus_store_records`` once the data lifecycle's sweep has run
a round, readable at any time without an agent: whether retention keeps the store's size
flat, and what an export or an erasure left.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer

from agent.settings import SettingsError, load_settings
from agent.store import StoreUnavailable, open_store


async def _sizes(db_url: str) -> dict[str, int]:
    store = await open_store(db_url)
    try:
        return await store.sizes()
    finally:
        await store.close()


def stats_command(
    db_url: Annotated[
        str | None,
        typer.Option(help="The store to count (default: CHORUS_DB_URL, as the agent reads it)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Records per table (SQLite) or collection (MongoDB) of the agent's store. Opening
    the store brings it to the current schema version, as the agent does."""
    try:
        url = db_url or load_settings().db_url
        sizes = asyncio.run(_sizes(url))
    except (SettingsError, StoreUnavailable, ValueError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(sizes))
        return
    width = max(map(len, sizes))
    for name, count in sizes.items():
        typer.echo(f"{name:<{width}}  {count:>12,}")
