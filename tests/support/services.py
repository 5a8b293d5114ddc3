"""Little real services for tests, built with the SDK or plain FastAPI.

Fault injection happens inside real servers: a skill that sleeps past its timeout, one
that answers garbage, one that answers the wrong shape, one that answers 500.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from agent.sdk import DialogView, Service, SkillHypothesis


def fixed_skill(name: str, text: str, confidence: float, delay: float = 0.0,
                **attributes: Any) -> FastAPI:
    """Answers ``text`` after ``delay`` seconds; ``human_attributes`` from kwargs."""
    service = Service(name)

    @service.skill
    async def answer(dialog: DialogView) -> SkillHypothesis:
        if delay:
            await asyncio.sleep(delay)
        return SkillHypothesis(text=text, confidence=confidence, human_attributes=attributes)

    return service.app


def window_reporter(name: str = "reporter") -> FastAPI:
    """A skill that tells what it was shown, as extra fields on its hypothesis."""
    service = Service(name)

    @service.skill
    def report(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(
            text=f"I saw {len(dialog.utterances)} utterances", confidence=0.5,
            seen=[u.text for u in dialog.utterances],
            seen_annotations=sorted(dialog.human_utterance.annotations),
            seen_human_attributes=dialog.human.attributes,
        )

    return service.app


def counter_skill(name: str = "counter", confidence: float = 0.99) -> FastAPI:
    """Increments ``count`` in the human attributes each turn it is chosen."""
    service = Service(name)

    @service.skill
    def count(dialog: DialogView) -> SkillHypothesis:
        current = int(dialog.human.attributes.get("count", 0))
        return SkillHypothesis(text=f"count is {current + 1}", confidence=confidence,
                               human_attributes={"count": current + 1},
                               bot_attributes={"last_count": current + 1})

    return service.app


def length_annotator(name: str = "length", delay: float = 0.0) -> FastAPI:
    service = Service(name)

    @service.annotator
    async def annotate(dialog: DialogView) -> dict[str, int]:
        if delay:
            await asyncio.sleep(delay)
        return {"chars": len(dialog.last_utterance.text)}

    return service.app


def raw_app(body: bytes | str | None = None, status: int = 200,
            json_body: Any = None) -> FastAPI:
    """A server whose /respond answers exactly what it is told to, whatever was asked."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> Any:
        await request.body()
        if json_body is not None:
            return JSONResponse(json_body, status_code=status)
        return PlainTextResponse(body or "", status_code=status)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
