"""The dialog read a turn starts with (``TurnStore.open_turn``), whole and as shown, on SQLite
and on a FerretDB: what a stored dialog of the shipped pipeline weighs, and what reading
its window costs the agent.

The dialog is made as a user makes one: :data:`bench.llm_turns.SCRIPT`'s 20 turns sent to
the shipped pipeline.json in the agent's process (``create_app`` over ``httpx``'s ASGI
transport, SQLite; the LLM skill off, as it is without ``LLM_BASE_URL``), so each human
utterance carries the retrieval annotator's passages, the turn's trace and hypotheses, and
each bot utterance the bot's attributes as its profile snapshot. Its window (the shipped
pipeline's widest ``context_window``, 12) is then read in alternating blocks, whole and
as shown (:data:`agent.state.models.NOT_SHOWN` left out by the database), and each
block's wall time and the process's CPU per read are reported, with their medians. With
``--mongo`` the same turns are stored on a MongoDB server (``--mongodb-url``, else
``MONGODB_URL``, else a FerretDB started for the run: :func:`bench.servers.mongodb_server`),
in a database of its own, through the store's own turn operations and read the same way
there; the wall time then includes the server's own work in its process, the CPU only the
agent's.

    .venv/bin/python -m bench.dialog_read
    .venv/bin/python -m bench.dialog_read --mongo --reads 100
    .venv/bin/python -m bench.dialog_read --mongodb-url mongodb://127.0.0.1:27017/

The figures go to ``bench/results/dialog_read.json`` (``--out``: elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agent.state.models import BotUtterance, HumanUtterance
from agent.store import Store, open_store
from agent.store.base import TurnEnd
from bench.llm_turns import SCRIPT
from bench.run import RESULTS
from bench.servers import mongodb_server, new_database

ROOT = Path(__file__).resolve().parents[1]
USER = "reader"
#: The shipped pipeline's widest context window: what its turns read.
WINDOW = 12


async def stored_dialog(folder: Path) -> str:
    """The SQLite store's URL after :data:`SCRIPT`'s turns through the shipped pipeline."""
    url = f"sqlite:///{folder}/chorus.db"
    for name in [name for name in os.environ if name.startswith(("CHORUS_", "LLM_"))]:
        del os.environ[name]
    os.environ["CHORUS_DB_URL"] = url
    os.environ["CHORUS_PIPELINE"] = str(ROOT / "pipeline.json")
    from agent.api.app import create_app

    app = create_app()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
            for text in SCRIPT:
                answer = await client.post("/", json={"user_id": USER, "payload": text})
                answer.raise_for_status()
    return url


def window_bytes(folder: Path, whole: bool) -> list[int]:
    """The stored window's documents' sizes, as SQLite hands them to the parse."""
    from agent.store.sqlite.turns import RECENT_AS_SHOWN, RECENT_WHOLE

    with sqlite3.connect(folder / "chorus.db") as db:
        (dialog_id,) = db.execute("SELECT id FROM dialogs WHERE active = 1").fetchone()
        rows = db.execute(RECENT_WHOLE if whole else RECENT_AS_SHOWN, [dialog_id, WINDOW])
        return [len(row[0].encode()) for row in rows]


async def copied_to(source: Store, target: Store) -> None:
    """The source's dialog stored again on ``target`` turn by turn, as the flow stores one."""
    (dialog_id,) = await source.reader.list_dialog_ids(0, 1, None)
    dialog = await source.reader.dialog(dialog_id)
    assert dialog is not None
    utterances = dialog.utterances
    for human, bot in zip(utterances[0::2], utterances[1::2], strict=True):
        assert isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance)
        start = await target.turns.open_turn(USER, "http_client", 0)
        fresh = HumanUtterance(text=human.text, user=human.user)
        await target.turns.add_utterance(start.dialog.dialog_id, fresh)
        whole = human.model_copy(update={"utt_id": fresh.utt_id, "date_time": fresh.date_time})
        end = TurnEnd(start.dialog.dialog_id, start.human.id, whole, bot, {}, {})
        await target.turns.finish_turn(end)


async def timed(store: Store, reads: int, blocks: int) -> dict[str, Any]:
    """Per read, in alternating blocks (who goes first alternates too): wall and CPU."""
    figures: dict[str, dict[str, list[float]]] = {
        "whole": {"wall_us": [], "cpu_us": []},
        "as_shown": {"wall_us": [], "cpu_us": []},
    }
    for whole in (True, False):  # warm both paths
        await store.turns.open_turn(USER, "http_client", WINDOW, whole=whole)
    for block in range(blocks):
        order = (True, False) if block % 2 == 0 else (False, True)
        for whole in order:
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(reads):
                await store.turns.open_turn(USER, "http_client", WINDOW, whole=whole)
            side = figures["whole" if whole else "as_shown"]
            side["wall_us"].append((time.perf_counter() - wall) / reads * 1e6)
            side["cpu_us"].append((time.process_time() - cpu) / reads * 1e6)
    summary: dict[str, Any] = {}
    for name, side in figures.items():
        summary[name] = {
            "blocks_wall_us": [round(v) for v in side["wall_us"]],
            "blocks_cpu_us": [round(v) for v in side["cpu_us"]],
            "median_wall_us": round(statistics.median(side["wall_us"])),
            "median_cpu_us": round(statistics.median(side["cpu_us"])),
        }
    summary["as_shown_over_whole_cpu"] = round(
        summary["as_shown"]["median_cpu_us"] / summary["whole"]["median_cpu_us"], 3
    )
    return summary


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chorus-dialog-read-") as tmp:
        folder = Path(tmp)
        url = await stored_dialog(folder)
        result: dict[str, Any] = {
            "load_average_before": os.getloadavg()[0],
            "window_bytes": {
                "whole": window_bytes(folder, whole=True),
                "as_shown": window_bytes(folder, whole=False),
            },
        }
        sqlite_store = await open_store(url)
        try:
            result["sqlite"] = await timed(sqlite_store, args.reads, args.blocks)
            if args.mongo or args.mongodb_url:
                with mongodb_server(args.mongodb_url, "dialog_read") as server:
                    mongo_store = await open_store(new_database(server))
                    try:
                        await copied_to(sqlite_store, mongo_store)
                        result["mongodb"] = await timed(
                            mongo_store, max(args.reads // 10, 10), args.blocks
                        )
                    finally:
                        await mongo_store.close()
        finally:
            await sqlite_store.close()
        result["load_average_after"] = os.getloadavg()[0]
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=300, help="reads a block (FerretDB: 1/10)")
    parser.add_argument("--blocks", type=int, default=6, help="blocks each, alternating")
    parser.add_argument(
        "--mongo", action="store_true", help="a MongoDB too: MONGODB_URL's, else a FerretDB's"
    )
    parser.add_argument("--mongodb-url", help="the MongoDB server to read on (implies --mongo)")
    parser.add_argument("--out", type=Path, default=RESULTS / "dialog_read.json")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
