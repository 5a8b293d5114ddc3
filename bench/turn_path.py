"""How much of the agent one ``POST /`` crosses: the project's modules and functions it
calls, and how many of the agent's frames lie under the deepest service handler's call,
traced with :func:`sys.setprofile` on a turn of the shipped services called in the agent's
process, over SQLite, after three warm-up turns.

    .venv/bin/python -m bench.turn_path            # the six-service pipeline below
    .venv/bin/python -m bench.turn_path pipeline.json

A count, not a timing: the same turn gives the same figures on a busy machine (a service
timing out under the profiler's cost changes the path, which the small default pipeline
avoids). The frames are counted on the handler's own stack, within the task that calls it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SERVICE_FOLDERS = frozenset({"annotators", "skills", "skill_selectors", "response_selectors"})

#: Rule services only, so that no call times out under the profiler's cost.
SMALL_PIPELINE: dict[str, Any] = {
    "services": {
        "annotators": {
            name: {"connector": {"module": f"annotators.{name}.app"}}
            for name in ("tokens", "intents", "badwords")
        },
        "skills": {
            name: {"connector": {"module": f"skills.{name}.app"}}
            for name in ("greeting", "fallback")
        },
        "response_selectors": {
            "confidence": {"connector": {"module": "response_selectors.confidence.app"}}
        },
    },
    "turn_timeout": 30,
}


def _project(filename: str) -> str | None:
    """The file's path in the repository; None for the standard library and packages."""
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return None if relative.parts[0] == ".venv" else str(relative)


class PathTrace:
    """What the profiled calls crossed."""

    def __init__(self) -> None:
        self.functions: set[tuple[str, str]] = set()
        self.deepest = 0

    @property
    def modules(self) -> set[str]:
        return {module for module, _ in self.functions}

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        where = _project(frame.f_code.co_filename)
        if where is None:
            return
        self.functions.add((where, frame.f_code.co_qualname))
        if where.split("/")[0] in SERVICE_FOLDERS:
            depth, caller = 0, frame.f_back
            while caller is not None:
                place = _project(caller.f_code.co_filename)
                depth += place is not None and place.startswith("agent/")
                caller = caller.f_back
            self.deepest = max(self.deepest, depth)


async def trace_turn(pipeline: Path) -> PathTrace:
    folder = tempfile.mkdtemp()
    os.environ["CHORUS_DB_URL"] = f"sqlite:///{folder}/chorus.db"
    os.environ["CHORUS_PIPELINE"] = str(pipeline)
    from agent.api.app import create_app

    app = create_app()
    trace = PathTrace()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:
            body = {"user_id": "warm", "payload": "hello there"}
            for _ in range(3):
                (await client.post("/", json=body)).raise_for_status()
            sys.setprofile(trace.profile)
            try:
                answer = await client.post("/", json={**body, "user_id": "traced"})
            finally:
                sys.setprofile(None)
            answer.raise_for_status()
    return trace


def main() -> None:
    if len(sys.argv) > 1:
        pipeline = Path(sys.argv[1]).resolve()
    else:
        pipeline = Path(tempfile.mkdtemp()) / "pipeline.json"
        pipeline.write_text(json.dumps(SMALL_PIPELINE), encoding="utf-8")
    trace = asyncio.run(trace_turn(pipeline))
    agent = {(m, f) for m, f in trace.functions if m.startswith("agent/")}
    print(f"project modules: {len(trace.modules)}, of the agent: {len({m for m, _ in agent})}")
    print(f"project functions: {len(trace.functions)}, of the agent: {len(agent)}")
    print(f"agent frames under the deepest service handler: {trace.deepest}")


if __name__ == "__main__":
    main()
