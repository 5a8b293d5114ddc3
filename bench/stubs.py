"""Near-zero-compute services in the shape of the default pipeline, in one process.

2 annotators, a skill selector, 3 skills and a response selector: 7 service calls per
turn. The stubs are a bare ASGI app (no framework, no validation) answering canned JSON,
so what a benchmark measures is the agent. ``--delay-ms`` makes the skills sleep (for the
fan-out benchmark), ``--skills`` sets how many there are.

``GET /calls`` answers how many calls each path has had, so a benchmark can check that an
agent really made its 7 calls a turn. ``/select_response/dp_agent`` is the response
selector in DeepPavlov Agent's shape (``bench/dp_agent.py``): where the Chorus selector
answers an index, dp-agent's stores what its selector answers as the bot utterance, so
this one answers the hypothesis at that index (the first, as ``/select_response`` does).
Run: ``python -m bench.stubs --port 8900 [--skills 3] [--delay-ms 0]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

ANNOTATORS = ("stub_ann1", "stub_ann2")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _answer(path: str, request: dict[str, Any]) -> Any:
    dialogs = len(request["dialogs"])
    if path == "/select_response/dp_agent":
        return [dialog["human_utterances"][-1]["hypotheses"][0] for dialog in request["dialogs"]]
    if path == "/annotate":
        return [{"ok": True}] * dialogs
    if path == "/select_skills":
        return [[]] * dialogs
    if path == "/select_response":
        return [{"index": 0, "reason": "stub"}] * dialogs
    number = int(path.rsplit("/", 1)[1])
    return [
        [
            {
                "text": f"answer {number}",
                "confidence": round(0.1 * number, 2),
                "human_attributes": {"last": number},
            }
        ]
    ] * dialogs


def make_app(delay_ms: float) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    calls: Counter[str] = Counter()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path = scope["path"]
        if path == "/health":
            payload = b'{"status":"ok"}'
        elif path == "/calls":
            payload = json.dumps(calls).encode()
        else:
            calls[path] += 1
            if delay_ms and path.startswith("/skill/"):
                await asyncio.sleep(delay_ms / 1000)
            payload = json.dumps(_answer(path, json.loads(body))).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

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
    uvicorn.run(
        make_app(args.delay_ms),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
