"""The pipeline's kind, chosen: ``CHORUS_PIPELINE`` (and each arm of ``CHORUS_EXPERIMENT``)
may name a Chorus pipeline file (:mod:`agent.pipeline`) or a dp-agent ``pipeline_conf.json``
(:mod:`agent.dream`); the kind is told once, by the content, and each is validated by its
own model.

This is the one place that knows both kinds, above both (they sit side by side on
:mod:`agent.turn` and never import each other): everything above it holds a
:class:`~agent.turn.base.LoadedPipeline` and asks it, never which kind it is. The
composition root and the command line load what the settings name through
:func:`load_configured`, and so never see a kind's defaults.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from agent.dream.graph import DEFAULT_FALLBACK, DEFAULT_TURN_TIMEOUT, DEFAULT_WINDOW
from agent.dream.kind import DreamKind
from agent.pipeline.kind import ChorusKind
from agent.settings import Settings
from agent.turn.arms import Arm, Experiment, ExperimentConfig
from agent.turn.base import LoadedPipeline, LoadOptions
from agent.turn.config import PipelineConfigError


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


def load_experiment(
    path: Path,
    *,
    window: int,
    turn_timeout: float | None,
    key: bytes | None = None,
) -> Experiment:
    """The experiment the file describes, each arm's pipeline loaded and checked as the
    agent checks its one pipeline; :class:`PipelineConfigError` names the file and the bad
    key. ``window`` and ``turn_timeout`` apply to dp-agent pipeline files, as for
    ``CHORUS_PIPELINE``; ``key`` is ``CHORUS_ARM_KEY``, the draw's secret."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PipelineConfigError(f"cannot read experiment file {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PipelineConfigError(f"experiment file {path} is not JSON: {exc}") from None
    try:
        config = ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise PipelineConfigError(f"experiment file {path}: {problems}") from None
    arms = []
    for index, arm in enumerate(config.arms):
        where = arm.pipeline if arm.pipeline.is_absolute() else path.parent / arm.pipeline
        try:
            pipeline = load_any_pipeline(where, window=window, turn_timeout=turn_timeout)
        except PipelineConfigError as exc:
            raise PipelineConfigError(
                f"experiment file {path}: arms.{index}.pipeline ({arm.name}): {exc}"
            ) from None
        arms.append(Arm(arm.name, arm.weight, where, pipeline))
    return Experiment(config.name, tuple(arms), path, key)


def load_configured(settings: Settings) -> tuple[LoadedPipeline, Experiment | None]:
    """The pipeline the settings name, and the experiment when ``CHORUS_EXPERIMENT`` names
    one (the pipeline is then its first arm's); a dp-agent file gets the dp-agent
    defaults and ``DREAM_TURN_TIMEOUT``."""
    if settings.experiment is None:
        pipeline = load_any_pipeline(
            settings.pipeline, window=DEFAULT_WINDOW, turn_timeout=settings.dream_turn_timeout
        )
        return pipeline, None
    experiment = load_experiment(
        settings.experiment,
        window=DEFAULT_WINDOW,
        turn_timeout=settings.dream_turn_timeout,
        key=settings.arm_key_bytes(),
    )
    return experiment.default.pipeline, experiment
