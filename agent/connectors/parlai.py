"""The ``parlai`` protocol: skills that speak ParlAI's observe/act.

For each dialog the agent POSTs one observation of the newest human utterance::

    {"text": "...", "id": "chorus", "episode_done": false,
     "label_candidates": [...],          # when the user's observation carried them
     "history": ["...", "..."]}          # the earlier utterances of the window, oldest first

and expects an act back: ``{"text": "...", "text_candidates": [...], "confidence": 0.7}``.
``text`` becomes a hypothesis with the act's ``confidence`` (0.5 when absent); each other
``text_candidates`` entry a hypothesis with a lower confidence, in the act's order, so
the act's ranking survives the agent's. A ParlAI agent keeps its history in memory; a
stateless service gets it from ``history``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agent.connectors.base import Connector
from agent.connectors.errors import BadServiceResponse
from agent.connectors.http import HttpConnector
from agent.connectors.transport import Transport
from agent.message import Message
from agent.sdk.models import DialogView

DEFAULT_CONFIDENCE = 0.5


class ParlaiAct(BaseModel):
    text: str = Field(min_length=1)
    text_candidates: list[str] = Field(default_factory=list, max_length=100)
    confidence: float = Field(default=DEFAULT_CONFIDENCE, ge=0.0, le=1.0)


def observation(view: DialogView) -> dict[str, Any]:
    """The observation of the newest human utterance, JSON-safe as ParlAI sends a Message."""
    utterance = view.human_utterance
    observed = Message(
        {
            "text": utterance.text,
            "id": "chorus",
            "episode_done": False,
            "history": [u.text for u in view.utterances[:-1]],
        }
    )
    candidates = utterance.attributes.get("label_candidates")
    if isinstance(candidates, list):
        observed["label_candidates"] = candidates
    if utterance.image:
        observed["image"] = utterance.image
    return observed.json_safe_payload()


def hypotheses(service: str, act: Any) -> list[dict[str, Any]]:
    try:
        parsed = ParlaiAct.model_validate(act)
    except ValidationError as exc:
        raise BadServiceResponse(service, f"not a ParlAI act: {exc.errors()[0]['msg']}") from None
    texts = [parsed.text, *(t for t in parsed.text_candidates if t and t != parsed.text)]
    return [
        {"text": text, "confidence": parsed.confidence / (rank + 1)}
        for rank, text in enumerate(texts)
    ]


class ParlaiConnector(Connector[DialogView]):
    """One observation per HTTP POST (ParlAI agents act on one at a time), concurrently."""

    def __init__(self, name: str, url: str, transport: Transport, timeout: float) -> None:
        self.name = name
        self._http = HttpConnector(name, url, transport, timeout)

    async def _one(self, view: DialogView) -> list[dict[str, Any]]:
        act = await self._http.post_json(observation(view))
        return hypotheses(self.name, act)

    async def call(self, views: list[DialogView]) -> list[Any]:
        return list(await asyncio.gather(*(self._one(v) for v in views)))
