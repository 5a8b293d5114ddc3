"""How long can one user's write hold up everyone else? The worst write the bounds accept.

The storage bounds (``MAX_ATTRIBUTE_KEYS``, ``MAX_VALUE_BYTES``, ...) cap what
one turn can ask the store to write. This times, on each store, a finished turn merging
``--keys`` attribute keys (default: the largest merge the default bounds accept) while
another user's ordinary turn runs at the same moment, against that ordinary turn alone.
With ``--keys 30000`` it shows what an unbounded merge cost before the bounds existed.

    .venv/bin/python bench/largest_write.py                 # SQLite and FerretDB
    .venv/bin/python bench/largest_write.py --keys 30000    # an over-the-bounds merge
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.state.models import BotUtterance, HumanUtterance  # noqa: E402
from agent.state.storage_limits import MAX_ATTRIBUTE_KEYS, StorageLimits  # noqa: E402
from agent.store import Store, open_store  # noqa: E402
from agent.store.base import TurnEnd  # noqa: E402
from bench.servers import mongodb_server  # noqa: E402

ROUNDS = 5


async def turn(store: Store, user: str, attributes: dict[str, str]) -> float:
    """One stored turn of ``user`` merging ``attributes``; its seconds."""
    started = time.perf_counter()
    start = await store.turns.open_turn(user, "bench", 4)
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text="hello", user=human.model_dump(mode="json"))
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    bot = BotUtterance(text="hi", orig_text="hi", active_skill="bench", confidence=1.0)
    await store.turns.finish_turn(
        TurnEnd(dialog.dialog_id, human.id, utterance, bot, attributes, {})
    )
    return time.perf_counter() - started


async def measure(url: str, keys: int) -> dict[str, float]:
    limits = StorageLimits()
    # as large as one output may be: the keys share MAX_VALUE_BYTES between them
    value = "v" * max(1, limits.max_bytes // max(keys, 1) - 24)
    store = await open_store(url)
    try:
        alone, beside, large = [], [], []
        for round_ in range(ROUNDS):
            alone.append(await turn(store, f"bystander-{round_}", {}))
            heavy = {f"k{round_}-{i}": value for i in range(keys)}
            big, small = await asyncio.gather(
                turn(store, f"heavy-{round_}", heavy), turn(store, f"other-{round_}", {})
            )
            large.append(big)
            beside.append(small)
    finally:
        await store.close()
    return {
        "ordinary turn alone, ms": statistics.median(alone) * 1000,
        "the large turn, ms": statistics.median(large) * 1000,
        "ordinary turn beside it, ms": statistics.median(beside) * 1000,
    }


@contextmanager
def stores(mongodb_url: str | None, which: list[str]) -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as tmp:
        urls = {}
        if "sqlite" in which:
            urls["sqlite"] = f"sqlite:///{tmp}/bench.db"
        if "mongodb" not in which:
            yield urls
            return
        with mongodb_server(mongodb_url, "largest_write") as url:
            yield {**urls, "mongodb": url if mongodb_url else f"{url}chorus_largest_write"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=MAX_ATTRIBUTE_KEYS)
    parser.add_argument("--stores", default="sqlite,mongodb")
    parser.add_argument("--mongodb-url", default=None)
    args = parser.parse_args()
    with stores(args.mongodb_url, args.stores.split(",")) as urls:
        for name, url in urls.items():
            print(f"{name}: {args.keys} keys merged in one turn, median of {ROUNDS} rounds")
            for label, figure in asyncio.run(measure(url, args.keys)).items():
                print(f"  {label:32} {figure:9.1f}")


if __name__ == "__main__":
    main()
