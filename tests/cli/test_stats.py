"""``chorus stats``: the store's size, per table or collection, on both stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from agent.store import open_store
from tests.store.test_contract import turn
from tests.support.processes import COMMAND_TIMEOUT


def stats(*args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_")}
    return subprocess.run(
        [sys.executable, "-m", "agent.cli.main", "stats", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        env=clean,
        check=False,
    )


async def test_stats_counts_what_the_store_holds(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        await turn(store, "ann", "hello")
        await turn(store, "ann", "again")
        await turn(store, "bob", "hi")
    finally:
        await store.close()
    result = stats("--db-url", db_url, "--json")
    assert result.returncode == 0, result.stderr
    sizes = json.loads(result.stdout)
    assert (sizes["users"], sizes["dialogs"], sizes["utterances"]) == (2, 2, 6)

    table = stats("--db-url", db_url)
    assert table.returncode == 0, table.stderr
    assert any(line.split() == ["utterances", "6"] for line in table.stdout.splitlines())


def test_stats_on_a_bad_url_says_what_to_fix() -> None:
    result = stats("--db-url", "postgres://nowhere")
    assert result.returncode == 1
    assert "unsupported database URL" in result.stderr
