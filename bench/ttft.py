"""Time to first token against time to answer, for a streamed LLM answer.

A local OpenAI-compatible endpoint writes ``--tokens`` tokens, one every ``--interval``
seconds (a model's fixed rate; the real endpoints are cloud APIs or local servers this
cannot assume). The LLM skill streams from it, the skill selector chooses only the LLM
skill, and the agent (SQLite) is asked ``--turns`` times each way:

- with ``Accept: text/event-stream``: when the first ``token`` event arrives, and when
  the ``answer`` event does;
- as JSON (what every client got before turn events): when the reply arrives.

Prints the medians (ms) and writes ``bench/results/ttft.json``.

    .venv/bin/python -m bench.ttft                      # 40 tokens at 25 ms: ~1 s of text
    .venv/bin/python -m bench.ttft --tokens 100 --interval 0.02
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agent.api.app import create_app
from agent.settings import Settings
from bench.run import RESULTS
from skills.llm.app import LLMSettings
from skills.llm.app import create_app as llm_app
from tests.support.openai_stream import StreamingOpenAI
from tests.support.servers import serving
from tests.support.services import choosing_skill_selector


def pipeline(llm_url: str, selector_url: str) -> dict[str, Any]:
    entry = {"timeout": 60.0}
    return {
        "services": {
            "skill_selectors": {"picker": {"connector": {"url": selector_url, **entry}}},
            "skills": {"llm": {"connector": {"url": llm_url, **entry}, "stream": True}},
        },
        "turn_timeout": 60.0,
    }


def streamed(client: httpx.Client, user: str) -> tuple[float, float]:
    """Seconds to the first token event and to the answer event."""
    started = time.perf_counter()
    first: float | None = None
    with client.stream(
        "POST",
        "/",
        json={"user_id": user, "payload": "Tell me a story"},
        headers={"Accept": "text/event-stream"},
    ) as response:
        for line in response.iter_lines():
            if line == "event: token" and first is None:
                first = time.perf_counter() - started
            elif line == "event: answer":
                answered = time.perf_counter() - started
    assert first is not None, "no token event: is the LLM skill streaming?"
    return first, answered


def plain(client: httpx.Client, user: str) -> float:
    started = time.perf_counter()
    reply = client.post("/", json={"user_id": user, "payload": "Tell me a story"})
    reply.raise_for_status()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.025, help="seconds per token")
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args(argv)

    model = StreamingOpenAI([f"word{i} " for i in range(args.tokens)], args.interval)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(model.app) as upstream,
        serving(choosing_skill_selector("llm")) as selector,
    ):
        settings = LLMSettings(_env_file=None, base_url=f"{upstream.url}/v1", model="bench")
        with serving(llm_app(settings)) as skill:
            path = Path(tmp) / "pipeline.json"
            path.write_text(json.dumps(pipeline(f"{skill.url}/respond", f"{selector.url}/respond")))
            agent = create_app(Settings(db_url=f"sqlite:///{tmp}/chorus.db", pipeline=path))
            with serving(agent) as server, httpx.Client(base_url=server.url, timeout=120) as client:
                plain(client, "warm-up")
                firsts, answers = zip(
                    *(streamed(client, f"sse-{i}") for i in range(args.turns)), strict=True
                )
                jsons = [plain(client, f"json-{i}") for i in range(args.turns)]

    figures = {
        "tokens": args.tokens,
        "interval_ms": args.interval * 1000,
        "turns": args.turns,
        "streamed_first_token_ms": round(statistics.median(firsts) * 1000, 1),
        "streamed_answer_ms": round(statistics.median(answers) * 1000, 1),
        "json_answer_ms": round(statistics.median(jsons) * 1000, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ttft.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"{args.tokens} tokens at {args.interval * 1000:g} ms, median of {args.turns} turns: "
        f"first token {figures['streamed_first_token_ms']} ms, streamed answer "
        f"{figures['streamed_answer_ms']} ms, JSON answer {figures['json_answer_ms']} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
