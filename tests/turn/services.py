"""Services the direct tests' pipelines name by module, called in the test's own process:
SDK services for a Chorus pipeline, and python senders for a dp-agent one. Each counts
the calls it answers, so a test can tell a turn that ran from one answered from store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from agent.sdk import DialogView, Service, SkillHypothesis

#: Calls answered, by service.
CALLS: Counter[str] = Counter()

echo = Service("echo")


@echo.skill
async def say_back(dialog: DialogView) -> SkillHypothesis:
    """Answers the text, and the utterance it was shown before it (``-``: none)."""
    CALLS["echo"] += 1
    before = dialog.utterances[-2].text if len(dialog.utterances) > 1 else "-"
    return SkillHypothesis(
        text=f"echo: {dialog.human_utterance.text} (after {before})", confidence=0.5
    )


shout = Service("shout")


@shout.skill
async def say_loud(dialog: DialogView) -> SkillHypothesis:
    CALLS["shout"] += 1
    return SkillHypothesis(text=dialog.human_utterance.text.upper(), confidence=0.5)


broken = Service("broken")


@broken.annotator
async def annotate(dialog: DialogView) -> dict[str, Any]:
    CALLS["broken"] += 1
    raise RuntimeError("a bug in the annotator")


Callback = Callable[..., Awaitable[None]]


class Echo:
    """A dp-agent python sender: one hypothesis saying the newest text back."""

    async def send(self, payload: dict[str, Any], callback: Callback) -> None:
        CALLS["dream-echo"] += 1
        text = payload["payload"]["sentences"][0]
        await callback(
            task_id=payload["task_id"], response={"text": f"echo: {text}", "confidence": 0.9}
        )


class Failing:
    """A dp-agent python sender whose service is down: it answers an exception, as
    dp-agent's connectors report faults."""

    async def send(self, payload: dict[str, Any], callback: Callback) -> None:
        CALLS["dream-failing"] += 1
        await callback(task_id=payload["task_id"], response=ConnectionError("service down"))
