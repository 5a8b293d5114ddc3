"""``CHORUS_PIPELINE`` may name a Chorus pipeline file or a dp-agent ``pipeline_conf.json``:
the format is told by the content, and each is validated by its own model.

This is the one place that knows both kinds of pipeline: everything above it holds a
:class:`~agent.pipeline.engine.LoadedPipeline` and asks it, never which kind it is."""

from __future__ import annotations

import json
from pathlib import Path

from agent.dream.config import is_dp_agent_config
from agent.dream.connectors import check_python_connectors
from agent.dream.graph import (
    DEFAULT_FALLBACK,
    DEFAULT_TURN_TIMEOUT,
    DEFAULT_WINDOW,
    build_dream_pipeline,
)
from agent.pipeline.config import PipelineConfigError, parse_pipeline_config
from agent.pipeline.engine import LoadedPipeline
from agent.pipeline.graph import build_pipeline


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
    data = read_document(path)
    if is_dp_agent_config(data):
        pipeline = build_dream_pipeline(
            data,
            str(path),
            window=window,
            turn_timeout=turn_timeout,
            fallback_response=fallback_response,
        )
        try:
            check_python_connectors(pipeline)
        except PipelineConfigError as exc:
            raise PipelineConfigError(f"{path}: {exc}") from None
        return pipeline
    return build_pipeline(parse_pipeline_config(data, source=str(path)))
