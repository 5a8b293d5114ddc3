"""Small real HTTP services speaking Dream's request and answer shapes (``*_batch`` keys,
``sentences``, ``dialogs``; answers a JSON list, one item per dialog of the request)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import FastAPI, Request


class Recorder:
    """What a service was sent, request by request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []


def spelling(recorder: Recorder | None = None) -> FastAPI:
    """Like annotators/spelling_preprocessing: ``{"sentences": [...]}`` -> a fixed string per
    sentence (lower-cased, "pls" spelled out)."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[str]:
        body = await request.json()
        if recorder is not None:
            recorder.requests.append(body)
        return [s.lower().replace("pls", "please") for s in body["sentences"]]

    return app


def eliza() -> FastAPI:
    """Like skills/eliza: ``last_utterance_batch`` and ``human_utterance_history_batch`` in,
    ``[text, confidence]`` per dialog out."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        body = await request.json()
        return [
            [f"Why do you say '{text}'? ({len(history)} said)", 0.6]
            for text, history in zip(
                body["last_utterance_batch"], body["human_utterance_history_batch"], strict=True
            )
        ]

    return app


def counter(recorder: Recorder | None = None, delay: float = 0.0) -> FastAPI:
    """A dff-style skill: ``human_utter_index_batch`` etc. in; ``[text, confidence,
    human_attributes, bot_attributes, attributes]`` per dialog out, its state kept in the
    human attributes as Dream's dff skills do."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        body = await request.json()
        if recorder is not None:
            recorder.requests.append(body)
        if delay:
            await asyncio.sleep(delay)
        answers = []
        for index, count, state in zip(
            body["human_utter_index_batch"],
            body["utterances_count_batch"],
            body["counter_state_batch"],
            strict=True,
        ):
            seen = state.get("turns", 0) + 1
            answers.append(
                [
                    f"turn {index}, {count} utterances, state {seen}",
                    0.9,
                    {"counter_state": {"turns": seen}, "name": "Alice"},
                    {"counter_turns": seen},
                    {"can_continue": "yes"},
                ]
            )
        return answers

    return app


def skill_selector(*names: str) -> FastAPI:
    """A skill selector: ``{"dialogs": [...]}`` in, a list of skill names per dialog out."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[str]]:
        body = await request.json()
        return [list(names) for _ in body["dialogs"]]

    return app


def response_selector(extra: int = 0, recorder: Recorder | None = None) -> FastAPI:
    """Like response_selectors/confidence_based_response_selector: the most confident
    hypothesis as ``[skill_name, text, confidence(, human_attributes, bot_attributes(,
    attributes))]``; ``extra`` (0, 2 or 3) says how many of the optional items it adds."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        body = await request.json()
        if recorder is not None:
            recorder.requests.append(body)
        answers = []
        for dialog in body["dialogs"]:
            best = max(dialog["human_utterances"][-1]["hypotheses"], key=lambda h: h["confidence"])
            answer = [best["skill_name"], best["text"], best["confidence"]]
            if extra >= 2:
                answer += [best.get("human_attributes", {}), best.get("bot_attributes", {})]
            if extra >= 3:
                answer.append({"chosen_by": "test selector"})
            answers.append(answer)
        return answers

    return app


def lengths(batch_key: bool = False, recorder: Recorder | None = None) -> FastAPI:
    """``{"sentences": [...]}`` in; a ``{"length": n}`` per sentence, or (``batch_key``) one
    ``{"batch": [...]}`` for them all, as Dream's hypothesis annotators answer."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[Any]:
        body = await request.json()
        if recorder is not None:
            recorder.requests.append(body)
        notes = [{"length": len(s)} for s in body["sentences"]]
        return [{"batch": notes}] if batch_key else notes

    return app


def shouting() -> FastAPI:
    """Rewrites a text (``add_text``): ``{"sentences": [...]}`` -> upper-cased."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[str]:
        body = await request.json()
        return [s.upper() for s in body["sentences"]]

    return app


def failing(status: int = 500) -> FastAPI:
    """Answers every request with an error status, as Dream's services do on a bad shape."""
    from fastapi.responses import PlainTextResponse

    app = FastAPI()

    @app.post("/respond")
    async def respond() -> PlainTextResponse:
        return PlainTextResponse("Internal Server Error", status_code=status)

    return app


def sleepy(seconds: float) -> FastAPI:
    """A skill that answers too late for the turn's deadline."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        await asyncio.sleep(seconds)
        return [["late", 1.0]]

    return app


def gated(received: threading.Event, release: threading.Event) -> FastAPI:
    """A skill that thinks until the test lets it answer: ``received`` is set when a request
    arrives, and the answer goes once ``release`` is."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        await request.json()
        received.set()
        await asyncio.to_thread(release.wait)
        return [["I thought it over", 0.9]]

    return app


def describer(recorder: Recorder | None = None) -> FastAPI:
    """``{"sentences": [...], "image": [...]}`` in; a skill's ``[text, confidence]`` that says
    what it was given, with an empty text said as such."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[Any]]:
        body = await request.json()
        if recorder is not None:
            recorder.requests.append(body)
        return [
            [f"text {text!r}, image {image}", 0.8]
            for text, image in zip(body["sentences"], body["image"], strict=True)
        ]

    return app
