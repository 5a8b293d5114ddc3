"""What a backup costs: `chorus export` and `chorus import` on a store of ``--dialogs``
dialogs of ``--turns`` turns each (a few KB of annotations and hypotheses per turn).

Fills a SQLite store through the store's own turn operations, exports it, imports the file
into a fresh SQLite store and a fresh MongoDB database (FerretDB started here, or
``--mongodb-url``), and prints for each step the time, the dialogs per second and the peak
of Python memory it allocated (tracemalloc): the last is what shows the export and the
import stream, whatever the store's size. Writes ``bench/results/backup.json``.

    .venv/bin/python bench/backup.py --dialogs 2000 --turns 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.backup.checks import ImportRules, check_backup  # noqa: E402
from agent.backup.files import DialogFilter, ImportReport, export_lines, read_records, restore  # noqa: E402
from agent.state.models import BotUtterance, HumanUtterance, Hypothesis  # noqa: E402
from agent.store import Store, open_store  # noqa: E402
from agent.store.base import TurnEnd  # noqa: E402
from bench.servers import mongodb_server, new_database  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "backup.json"


async def fill(store: Store, dialogs: int, turns: int) -> None:
    for number in range(dialogs):
        user = f"user-{number % max(1, dialogs // 2)}"
        for turn in range(turns):
            start = await store.turns.open_turn(user, "http_client", 0)
            human, head = start.human, start.dialog
            utterance = HumanUtterance(text=f"message {turn} " * 5)
            await store.turns.add_utterance(head.dialog_id, utterance)
            utterance.annotations = {"tokens": utterance.text.split(), "sentiment": {"pos": 0.5}}
            utterance.hypotheses = [
                Hypothesis(skill_name=f"skill{i}", text="an answer " * 8, confidence=i / 10)
                for i in range(4)
            ]
            bot = BotUtterance(text="an answer", active_skill="skill3", confidence=0.3)
            await store.turns.finish_turn(
                TurnEnd(head.dialog_id, human.id, utterance, bot, {"n": turn}, {})
            )
        await store.turns.close_active_dialog(user)


async def export(store: Store, path: Path) -> int:
    dialogs = 0
    with path.open("w", encoding="utf-8") as out:
        async for line, is_dialog in export_lines(store.reader, DialogFilter()):
            out.write(line + "\n")
            dialogs += is_dialog
    return dialogs


async def import_into(store: Store, path: Path) -> ImportReport:
    """As `chorus import` does: the whole file checked against the store, then stored."""
    with path.open(encoding="utf-8") as lines:
        await check_backup(store.reader, read_records(lines), ImportRules())
    report = ImportReport()
    with path.open(encoding="utf-8") as lines:
        for _, record in read_records(lines):
            await restore(store.restore, record, report)
    return report


async def measured(step: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Seconds the step took, and the peak of Python memory it allocated (MB)."""
    tracemalloc.start()
    started = time.perf_counter()
    await step()
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / 1e6


async def run(dialogs: int, turns: int, mongodb_url: str, scratch: Path) -> dict[str, Any]:
    source = await open_store(f"sqlite:///{scratch}/source.db")
    await fill(source, dialogs, turns)
    backup = scratch / "backup.jsonl"
    figures: dict[str, Any] = {"dialogs": dialogs, "turns": turns}
    seconds, peak = await measured(lambda: export(source, backup))
    figures["export_sqlite"] = {"seconds": seconds, "peak_mb": peak}
    figures["file_mb"] = backup.stat().st_size / 1e6
    await source.close()
    for name, url in (
        ("import_sqlite", f"sqlite:///{scratch}/target.db"),
        ("import_mongodb", new_database(mongodb_url)),
    ):
        target = await open_store(url)
        seconds, peak = await measured(lambda t=target: import_into(t, backup))  # type: ignore[misc]
        figures[name] = {"seconds": seconds, "peak_mb": peak}
        again, _ = await measured(lambda t=target: import_into(t, backup))  # type: ignore[misc]
        figures[name]["again_seconds"] = again
        if name == "import_mongodb":
            seconds, peak = await measured(lambda t=target: export(t, scratch / "again.jsonl"))  # type: ignore[misc]
            figures["export_mongodb"] = {"seconds": seconds, "peak_mb": peak}
        await target.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--mongodb-url")
    args = parser.parse_args()
    with ExitStack() as stack:
        url = stack.enter_context(mongodb_server(args.mongodb_url, "backup"))
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        figures = asyncio.run(run(args.dialogs, args.turns, url, scratch))
    for key, value in figures.items():
        if isinstance(value, dict):
            rate = figures["dialogs"] / value["seconds"]
            extra = f", again {value['again_seconds']:.1f} s" if "again_seconds" in value else ""
            print(
                f"{key:<15} {value['seconds']:7.1f} s  {rate:7.0f} dialogs/s  "
                f"peak {value['peak_mb']:.1f} MB{extra}"
            )
    print(f"backup file     {figures['file_mb']:.1f} MB")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
