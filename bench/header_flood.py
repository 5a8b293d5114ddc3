"""What one client's huge request header costs everyone else, and the agent's memory.

Starts the agent as the image does (``python -m agent.api.serve``) on SQLite, sends one
request whose header is ``--mb`` megabytes (as fast as the socket takes it), and while it
streams times other clients' ``GET /ping`` (the slowest one is what a user felt). Reports
the agent's peak RSS growth (``VmHWM`` minus ``VmRSS`` before, from /proc) and what the
flooding client got back.

    .venv/bin/python bench/header_flood.py --mb 30
    .venv/bin/python bench/header_flood.py --slow 1005 --nofile 1024   # unfinished requests

With ``--slow N`` it opens N requests that never finish their headers instead (the agent's
open-file limit set to ``--nofile``) and reports how 40 new clients, and one client
connected before, fare while they are open.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def flood(port: int, megabytes: int, result: dict[str, object]) -> None:
    """One request with an ``X-Big`` header of ``megabytes`` MB; what came back."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(120)
        chunk = b"a" * 65536
        started = time.perf_counter()
        try:
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ")
            for _ in range(megabytes * 16):
                sock.sendall(chunk)
            sock.sendall(b"\r\n\r\n")
            result["sent"] = "all"
        except OSError as exc:
            result["sent"] = f"stopped: {exc.__class__.__name__}"
        try:
            result["answer"] = sock.recv(200).split(b"\r\n", 1)[0].decode()
        except OSError as exc:
            result["answer"] = exc.__class__.__name__
        result["seconds"] = time.perf_counter() - started


def unfinished(base: str, port: int, count: int) -> None:
    """``count`` requests that never finish their headers, then 40 new clients' pings and
    one from a client connected before them."""
    with httpx.Client(timeout=10) as before:
        before.get(f"{base}/ping").raise_for_status()
        slow = []
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")
                slow.append(sock)
            except OSError:
                break
        statuses: dict[str, int] = {}
        for _ in range(40):
            try:
                got = str(httpx.get(f"{base}/ping", timeout=10).status_code)
            except httpx.TransportError as exc:
                got = exc.__class__.__name__
            statuses[got] = statuses.get(got, 0) + 1
        try:
            earlier = str(before.get(f"{base}/ping").status_code)
        except httpx.TransportError as exc:
            earlier = exc.__class__.__name__
        started = time.monotonic()
        while time.monotonic() - started < 60:
            try:
                if httpx.get(f"{base}/ping", timeout=10).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        print(
            f"{len(slow)} unfinished requests open: 40 new clients got {statuses}; the client "
            f"connected before got {earlier}; a new client served again after "
            f"{time.monotonic() - started:.1f} s (60 = not within 60 s)"
        )
        for sock in slow:
            sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=30)
    parser.add_argument("--slow", type=int, default=0, help="requests left unfinished")
    parser.add_argument("--nofile", type=int, default=1024, help="the agent's ulimit -n")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "CHORUS_PIPELINE": str(ROOT / "pipeline.json"),
            "CHORUS_DB_URL": f"sqlite:///{tmp}/chorus.db",
        }
        agent = subprocess.Popen(
            [sys.executable, "-m", "agent.api.serve", "--port", str(port), "--log-level", "error"],
            env=env,
            cwd=tmp,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: resource.setrlimit(
                resource.RLIMIT_NOFILE, (args.nofile, args.nofile)
            ),
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{base}/ping", timeout=1).raise_for_status()
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and agent.poll() is None
                    time.sleep(0.05)
            if args.slow:
                unfinished(base, port, args.slow)
                return
            rss_before = _kib(agent.pid, "VmRSS")
            result: dict[str, object] = {}
            flooder = threading.Thread(target=flood, args=(port, args.mb, result))
            flooder.start()
            worst, failed, asked = 0.0, 0, 0
            with httpx.Client(timeout=60) as client:
                while (flooder.is_alive() or asked < 20) and asked < 2000:
                    asked += 1
                    started = time.perf_counter()
                    try:
                        client.get(f"{base}/ping", headers={"Connection": "close"})
                    except httpx.TransportError:
                        failed += 1
                    worst = max(worst, time.perf_counter() - started)
            flooder.join()
            peak = _kib(agent.pid, "VmHWM")
            print(
                f"{args.mb} MB header ({args.slow} unfinished requests open): flooder "
                f"{result.get('sent')}, answer {result.get('answer')!r} after "
                f"{result.get('seconds', 0):.2f} s; other clients: {asked} pings, slowest "
                f"{worst:.3f} s, {failed} failed; agent RSS {rss_before / 1024:.0f} MB -> peak "
                f"{peak / 1024:.0f} MB (+{(peak - rss_before) / 1024:.0f} MB)"
            )
        finally:
            agent.terminate()
            agent.wait(30)


if __name__ == "__main__":
    main()
