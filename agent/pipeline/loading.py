"""``CHORUS_PIPELINE`` may name a Chorus pipeline file or a dp-agent ``pipeline_conf.json``:
the kind is told once, by the content, and each is validated by its own model.

This is the one place that knows both kinds of pipeline: everything above it holds a
:class:`~agent.pipeline.engine.LoadedPipeline` and asks it, never which kind it is."""

from __future__ import annotations

import json
from pathlib import Path

from agent.dream.graph import DEFAULT_FALLBACK, DEFAULT_TURN_TIMEOUT, DEFAULT_WINDOW
from agent.dream.kind import DreamKind
from agent.pipeline.config import PipelineConfigError
from agent.pipeline.engine import LoadedPipeline, LoadOptions
from agent.pipeline.kind import ChorusKind


def read_document(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PipelineConfigError(f"cannot read pipeline config {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PipelineConfigError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def load_any_pipeline(
    path: Path,
    *,
    window: int = DEFAULT_WINDOW,
    turn_timeout: float | None = DEFAULT_TURN_TIMEOUT,
    fallback_response: str = DEFAULT_FALLBACK,
) -> LoadedPipeline:
    """The pipeline the file describes, in whichever format it is written; the dp-agent
    settings apply to a dp-agent file only (a Chorus file carries its own)."""
    document = read_document(path)
    if DreamKind.recognises(document):
        options = LoadOptions(window, turn_timeout, fallback_response)
        return DreamKind.load(document, str(path), options)
    return ChorusKind.load(document, str(path))
