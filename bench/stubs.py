"""Near-zero-compute services in the shape of the default pipeline, in one process.

2 annotators, a skill selector, 3 skills and a response selector: 7 service calls per
turn, each answering at once, so what a benchmark measures is the agent. ``--delay-ms``
makes the skills sleep (for the fan-out benchmark), ``--skills`` sets how many there are.
Run: ``python -m bench.stubs --port 8900 [--skills 3] [--delay-ms 0]``.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

ANNOTATORS = ("stub_ann1", "stub_ann2")


def make_app(skills: int, delay_ms: float) -> FastAPI:
    """Raw JSON in and out (no validation): the stubs must cost next to nothing."""
    import json

    app = FastAPI()

    def reply(items: list[Any]) -> Response:
        return Response(json.dumps(items), media_type="application/json")

    async def count(request: Request) -> int:
        return len(json.loads(await request.body())["dialogs"])

    @app.post("/annotate")
    async def annotate(request: Request) -> Response:
        return reply([{"ok": True}] * await count(request))

    @app.post("/select_skills")
    async def select_skills(request: Request) -> Response:
        return reply([[]] * await count(request))

    @app.post("/skill/{number}")
    async def skill(number: int, request: Request) -> Response:
        n = await count(request)
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        return reply([[{"text": f"answer {number}", "confidence": 0.1 * number,
                        "human_attributes": {"last": number}}]] * n)

    @app.post("/select_response")
    async def select_response(request: Request) -> Response:
        return reply([{"index": 0, "reason": "stub"}] * await count(request))

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    app.state.skills = skills
    return app


def pipeline(port: int, skills: int = 3, timeout: float = 5.0) -> dict[str, Any]:
    """The pipeline config that points the agent at a stubs process."""
    base = f"http://127.0.0.1:{port}"

    def entry(path: str) -> dict[str, Any]:
        return {"connector": {"url": f"{base}{path}", "timeout": timeout}, "context_window": 2}

    return {
        "services": {
            "annotators": {name: entry("/annotate") for name in ANNOTATORS},
            "skill_selectors": {"stub_selector": entry("/select_skills")},
            "skills": {f"stub_skill{i}": entry(f"/skill/{i}") for i in range(1, skills + 1)},
            "response_selectors": {"stub_response": entry("/select_response")},
        },
        "turn_timeout": 30.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--skills", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    uvicorn.run(make_app(args.skills, args.delay_ms), host="127.0.0.1", port=args.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
