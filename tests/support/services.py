"""Little real services for tests, built with the SDK or plain FastAPI.

Fault injection happens inside real servers: a skill that sleeps past its timeout, one
that answers garbage, one that answers the wrong shape, one that answers 500.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from agent.sdk import DialogView, Service, SkillHypothesis, SkillSelection, StreamStart


def fixed_skill(
    name: str, text: str, confidence: float, delay: float = 0.0, **attributes: Any
) -> FastAPI:
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
            text=f"I saw {len(dialog.utterances)} utterances",
            confidence=0.5,
            seen=[u.text for u in dialog.utterances],
            seen_annotations=sorted(dialog.human_utterance.annotations),
            seen_human_attributes=dialog.human.attributes,
            seen_attributes=dialog.human_utterance.attributes,
        )

    return service.app


def counter_skill(name: str = "counter", confidence: float = 0.99) -> FastAPI:
    """Increments ``count`` in the human attributes each turn it is chosen."""
    service = Service(name)

    @service.skill
    def count(dialog: DialogView) -> SkillHypothesis:
        current = int(dialog.human.attributes.get("count", 0))
        return SkillHypothesis(
            text=f"count is {current + 1}",
            confidence=confidence,
            human_attributes={"count": current + 1},
            bot_attributes={"last_count": current + 1},
        )

    return service.app


def length_annotator(name: str = "length", delay: float = 0.0) -> FastAPI:
    service = Service(name)

    @service.annotator
    async def annotate(dialog: DialogView) -> dict[str, int]:
        if delay:
            await asyncio.sleep(delay)
        return {"chars": len(dialog.last_utterance.text)}

    return service.app


def raw_app(body: bytes | str | None = None, status: int = 200, json_body: Any = None) -> FastAPI:
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


def choosing_skill_selector(*names: str) -> FastAPI:
    service = Service("picker")

    @service.skill_selector
    def pick(dialog: DialogView) -> list[str]:
        return list(names)

    return service.app


def deciding_skill_selector(skills: list[str], reason: str, decides: list[str] | None) -> FastAPI:
    """A selector that says why, and about which skills it decides."""
    service = Service("decider")

    @service.skill_selector
    def pick(dialog: DialogView) -> SkillSelection:
        return SkillSelection(skills=skills, reason=reason, decides=decides)

    return service.app


def impostor_skill(name: str = "impostor") -> FastAPI:
    """A skill that tries to write outside its slot: it claims another skill's name."""
    return raw_app(json_body=[[{"text": "trust me", "confidence": 1.0, "skill_name": "greeting"}]])


def length_candidate_annotator(name: str = "lengths") -> FastAPI:
    service = Service(name)

    @service.candidate_annotator
    def annotate(dialog: DialogView, hypothesis: Any) -> dict[str, int]:
        return {"chars": len(hypothesis.text)}

    return service.app


def last_index_selector(name: str = "last") -> FastAPI:
    """Chooses the last hypothesis, to tell its choice from the confidence default."""
    service = Service(name)

    @service.response_selector
    def choose(dialog: DialogView) -> Any:
        from agent.sdk import Selection

        return Selection(index=len(dialog.human_utterance.hypotheses) - 1, reason="the last one")

    return service.app


def image_annotator(name: str = "vision") -> FastAPI:
    """Reports what image reached it, as annotators of images would receive it."""
    service = Service(name)

    @service.annotator
    def look(dialog: DialogView) -> dict[str, Any]:
        image = dialog.human_utterance.image
        return {"image": image[:40] if image else None}

    return service.app


def where_is_parlai_agent() -> FastAPI:
    """A ParlAI-speaking agent for bAbI-like "Where is X?" tasks: it answers the last place
    mentioned in the history and the text, and ranks the label candidates after it."""
    import re

    app = FastAPI()

    @app.post("/act")
    async def act(observation: dict[str, Any]) -> dict[str, Any]:
        context = "\n".join([*observation.get("history", []), observation["text"]])
        places = re.findall(r"to the (\w+)", context)
        answer = places[-1] if places else "nowhere"
        candidates = [c for c in observation.get("label_candidates", []) if c != answer]
        return {"text": answer, "text_candidates": [answer, *candidates], "id": "where_is"}

    return app


def counting_failure(status: int = 503) -> tuple[FastAPI, list[int]]:
    """Always fails with ``status``; the list counts the requests that reached it."""
    seen: list[int] = []
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> PlainTextResponse:
        await request.body()
        seen.append(1)
        return PlainTextResponse("down for maintenance", status_code=status)

    return app, seen


def hanging_skill() -> FastAPI:
    """Never answers; touches ``$HANGING_SKILL_MARKER`` when a call arrives, so a test knows
    the agent is waiting on it (run as a process: ``--factory``, then kill it)."""
    service = Service("hanging")

    @service.skill
    def hang(dialog: DialogView) -> SkillHypothesis:  # a worker thread, blocked for good
        Path(os.environ["HANGING_SKILL_MARKER"]).touch()
        threading.Event().wait()
        raise AssertionError("unreachable")

    return service.app


def streaming_skill(
    name: str, pieces: list[str], confidence: float = 0.9, fail_after: int | None = None
) -> FastAPI:
    """Streams ``pieces`` (an async generator skill, as the SDK lets one be written);
    ``fail_after``: raises after that many pieces."""
    service = Service(name)

    @service.skill
    async def tell(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        yield StreamStart(confidence=confidence, told=len(pieces))
        for index, piece in enumerate(pieces):
            if index == fail_after:
                raise RuntimeError("the story generator broke")
            yield piece

    return service.app


def gated_story(gate: threading.Event) -> FastAPI:
    """Streams "Once upon ", waits for ``gate``, then "a time."."""
    service = Service("story")

    @service.skill
    async def tell(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        yield StreamStart(confidence=0.9)
        yield "Once "
        yield "upon "
        await asyncio.to_thread(gate.wait, 20)
        yield "a time."

    return service.app
