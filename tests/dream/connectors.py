"""A python connector as Dream writes them (``send(payload, callback)``), imported by the
agent as ``tests.dream.connectors:AnnotatorChooser``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class AnnotatorChooser:
    """Like Dream's PostAnnotatorSelectorConnector: names the response annotators that have
    not annotated the bot's newest utterance yet. Answers from a task of its own, after
    ``send`` returns, as Dream's BatchConnector does."""

    def __init__(self, annotator_names: list[str]) -> None:
        self.annotator_names = set(annotator_names)
        self._answering: set[asyncio.Future[None]] = set()  # referenced until done

    async def send(self, payload: dict[str, Any], callback: Callable[..., Awaitable[None]]) -> None:
        bots = payload["payload"]["bot_utterances"]
        done = set(bots[-1]["annotations"]) if bots else set()
        response = sorted(self.annotator_names - done)
        answer = asyncio.ensure_future(callback(task_id=payload["task_id"], response=response))
        self._answering.add(answer)
        answer.add_done_callback(self._answering.discard)


class Exploding:
    """Answers an exception through the callback, as dp-agent's connectors report faults."""

    async def send(self, payload: dict[str, Any], callback: Callable[..., Awaitable[None]]) -> None:
        await callback(task_id=payload["task_id"], response=RuntimeError("out of order"))
