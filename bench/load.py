"""A load generator speaking the dp-agent chat API (``POST /``), and what it measures.

aiohttp drives the load (it costs the least CPU per request on these 2-core machines, where
the generator shares the cores with the agent and the stubs).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class LoadResult:
    concurrency: int
    turns: int
    errors: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    dialog_ids: set[str] = field(default_factory=set)

    @property
    def throughput(self) -> float:
        return self.turns / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    def summary(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "turns": self.turns,
            "errors": self.errors,
            "turns_per_s": round(self.throughput, 1),
            "p50_ms": round(self.percentile(50) * 1000, 2),
            "p90_ms": round(self.percentile(90) * 1000, 2),
            "p99_ms": round(self.percentile(99) * 1000, 2),
        }


async def _worker(
    session: aiohttp.ClientSession,
    url: str,
    prefix: str,
    users: int,
    turns: int,
    result: LoadResult,
    fallback: str,
    stop_at: float,
) -> None:
    for i in range(turns):
        if time.perf_counter() > stop_at:
            return
        user = f"{prefix}-{i % users}"  # made as needed: the memory run has a million
        started = time.perf_counter()
        try:
            async with session.post(url, json={"user_id": user, "payload": f"hello {i}"}) as r:
                body = await r.json() if r.status == 200 else None
        except aiohttp.ClientError:
            body = None
        result.latencies.append(time.perf_counter() - started)
        if body is None or body.get("active_skill") == fallback:
            result.errors += 1
        else:
            result.dialog_ids.add(body["dialog_id"])


async def run_load(
    url: str,
    concurrency: int,
    turns: int,
    users_per_worker: int = 10,
    tag: str = "u",
    fallback: str = "fallback_response",
    deadline: float | None = None,
) -> LoadResult:
    """``turns`` turns spread over ``concurrency`` workers; each worker owns its users, so
    no two turns of one dialog are in flight at once. With ``deadline`` (seconds), no turn
    starts after it."""
    per_worker = max(1, turns // concurrency)
    result = LoadResult(concurrency, per_worker * concurrency, 0, 0.0)
    connector = aiohttp.TCPConnector(limit=concurrency + 4)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        stop_at = started + deadline if deadline is not None else float("inf")
        await asyncio.gather(
            *(
                _worker(
                    session,
                    url,
                    f"{tag}-c{concurrency}-w{w}",
                    users_per_worker,
                    per_worker,
                    result,
                    fallback,
                    stop_at,
                )
                for w in range(concurrency)
            )
        )
        result.seconds = time.perf_counter() - started
        result.turns = len(result.latencies)
    return result


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2) if values else float("nan")
