"""Which HTTP engine should carry the agent's service calls? Measured, on this machine.

A turn makes 7 service calls, so the engine under the connectors bounds the agent's turns
per second. This starts the benchmark's stub services (``bench.stubs``, one uvicorn
process on 127.0.0.1) and POSTs a one-dialog annotator request through each engine at
several concurrencies, each engine with one shared client and a pool sized for the load:

* ``httpx``: httpx's own ``AsyncClient`` (httpcore's pool);
* ``httpx+aiohttp``: httpx's API over the ``httpx-aiohttp`` transport, when installed;
* ``aiohttp``: an ``aiohttp.ClientSession``, what the agent's connectors used before;
* ``wire``: :class:`agent.connectors.wire.WireTransport`, what they use now.

    .venv/bin/python -m bench.http_clients [--calls 2000] [--levels 1,8,32]

Prints calls per second by engine and concurrency, and this process's CPU per call (the
client's own cost, which the agent pays 7 times a turn), and writes
``bench/results/http_clients.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from bench.ports import free_port
from bench.run import RESULTS, process

BODY = json.dumps(
    {
        "dialogs": [
            {
                "dialog_id": "d",
                "utterances": [
                    {"speaker": "human", "utt_id": "u", "text": "hello there", "annotations": {}}
                ],
                "human": {"attributes": {}},
                "bot": {"attributes": {}},
            }
        ]
    }
).encode()
HEADERS = {"Content-Type": "application/json"}

Call = Callable[[], Awaitable[None]]


async def calls_per_second(call: Call, concurrency: int, calls: int) -> float:
    """``calls`` calls split over ``concurrency`` workers, after a short warm-up."""
    await asyncio.gather(*(call() for _ in range(concurrency)))
    per_worker = max(1, calls // concurrency)

    async def worker() -> None:
        for _ in range(per_worker):
            await call()

    started = time.perf_counter()
    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    calls_made = per_worker * concurrency
    CPU_US[0] = 1e6 * (time.process_time() - cpu) / calls_made
    return calls_made / (time.perf_counter() - started)


#: The client's CPU per call (µs) in the last :func:`calls_per_second`.
CPU_US = [0.0]


async def with_httpx(
    url: str, concurrency: int, calls: int, transport: httpx.AsyncBaseTransport | None = None
) -> float:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, transport=transport, timeout=30) as client:

        async def call() -> None:
            response = await client.post(url, content=BODY, headers=HEADERS)
            response.raise_for_status()
            response.json()

        return await calls_per_second(call, concurrency, calls)


async def with_aiohttp(url: str, concurrency: int, calls: int) -> float:
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call() -> None:
            async with session.post(url, data=BODY, headers=HEADERS) as response:
                response.raise_for_status()
                json.loads(await response.read())

        return await calls_per_second(call, concurrency, calls)


async def with_httpx_over_aiohttp(url: str, concurrency: int, calls: int) -> float:
    from httpx_aiohttp import AiohttpTransport

    connector = aiohttp.TCPConnector(limit=concurrency)
    transport = AiohttpTransport(client=aiohttp.ClientSession(connector=connector))
    return await with_httpx(url, concurrency, calls, transport)


async def with_wire(url: str, concurrency: int, calls: int) -> float:
    from agent.connectors.transport import Request
    from agent.connectors.wire import WireTransport

    transport = WireTransport(max_connections=concurrency, keepalive=4.0)
    request = Request(url, BODY, HEADERS)
    try:

        async def call() -> None:
            async with transport.send(request, 30.0) as response:
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}")
                json.loads(await response.read(2**21))

        return await calls_per_second(call, concurrency, calls)
    finally:
        await transport.aclose()


def engines() -> dict[str, Callable[[str, int, int], Coroutine[Any, Any, float]]]:
    found: dict[str, Callable[[str, int, int], Coroutine[Any, Any, float]]] = {"httpx": with_httpx}
    try:
        import httpx_aiohttp  # noqa: F401
    except ImportError:
        print("httpx-aiohttp not installed: skipped (pip install -e '.[bench]')")
    else:
        found["httpx+aiohttp"] = with_httpx_over_aiohttp
    found["aiohttp"] = with_aiohttp
    found["wire"] = with_wire
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per engine and level")
    parser.add_argument("--levels", default="1,8,32", help="concurrencies, comma-separated")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="where http_clients.json goes (default: %(default)s)",
    )
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    port = free_port()
    stubs = [sys.executable, "-m", "bench.stubs", "--port", str(port)]
    results: dict[str, dict[str, float]] = {}
    cpu: dict[str, dict[str, float]] = {}
    with process(stubs, f"http://127.0.0.1:{port}/health"):
        url = f"http://127.0.0.1:{port}/annotate"
        for name, engine in engines().items():
            results[name], cpu[name] = {}, {}
            for level in levels:
                rate = asyncio.run(engine(url, level, args.calls))
                results[name][str(level)] = round(rate)
                cpu[name][str(level)] = round(CPU_US[0])
                print(
                    f"  {name:14} C={level:<3} {rate:7.0f} calls/s, {CPU_US[0]:5.0f} µs CPU a call",
                    flush=True,
                )
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"calls": args.calls, "calls_per_s": results, "cpu_us_per_call": cpu}
    (args.out / "http_clients.json").write_text(json.dumps(report, indent=2))
    print("calls/s   " + "".join(f"{'C=' + str(level):>9}" for level in levels))
    for name, rates in results.items():
        print(f"{name:14}" + "".join(f"{rates[str(level)]:>9}" for level in levels))
    print("µs CPU/call" + "".join(f"{'C=' + str(level):>9}" for level in levels))
    for name, costs in cpu.items():
        print(f"{name:14}" + "".join(f"{costs[str(level)]:>9}" for level in levels))


if __name__ == "__main__":
    main()
