"""``chorus stats``: the store's size, per table or collection, on both stores."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from agent.cli.main import app
from agent.store import open_store
from tests.store.test_contract import turn

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores


def stats(*args: str) -> subprocess.CompletedProcess[str]:
    """``chorus stats ARGS`` with no ``CHORUS_*`` setting from outside: its exit code, its
    output and its errors. Run in this process by typer's runner (a Python started per call
    cost seconds of imports each, most of these tests' time), in a thread of its own: the
    command runs its own event loop, and an async test's is running in this thread."""
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("CHORUS_")]:
            patch.delenv(key)
        with ThreadPoolExecutor(1) as thread:
            result = thread.submit(CliRunner().invoke, app, ["stats", *args]).result()
    errors = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        errors += repr(result.exception)  # what a process would have printed as it died
    return subprocess.CompletedProcess(
        ["chorus", "stats", *args], result.exit_code, result.stdout, errors
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
