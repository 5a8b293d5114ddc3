"""Pipeline arms: an experiment runs two or more pipeline files side by side, each dialog
on one of them.

An experiment file (``CHORUS_EXPERIMENT``) names the arms and their weights::

    {"name": "selector-v2",
     "arms": [{"name": "control", "pipeline": "pipeline.json", "weight": 1},
              {"name": "candidate", "pipeline": "candidate.json", "weight": 1}]}

A new dialog gets its arm from a keyed hash of the user's id (:meth:`Experiment.arm_for`),
keyed with the experiment's name and the operator's secret (``CHORUS_ARM_KEY``): the same
user lands on the same arm on every replica (given the same secret) and after every
restart, with no shared state and no write to agree on it, and a new experiment (another
name) draws its users afresh. The name is no secret (it shows on ``/pipeline`` and in the
docs' example), so without the key a client could compute the draw and choose its arm by
choosing its user id. The arm is stored on the dialog when it is opened and read from there
afterwards, so changing the weights or the key, or removing an arm, never moves a dialog
that exists: they only decide where new dialogs go.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent.pipeline.config import PipelineConfigError
from agent.pipeline.engine import LoadedPipeline
from agent.pipeline.loading import load_any_pipeline

#: An arm's name: it is stored on dialogs and is a metrics label, so short and plain.
ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ArmConfig(BaseModel):
    """One arm: a pipeline file, and the share of new dialogs it gets."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=ARM_NAME)
    pipeline: Path = Field(description="its pipeline file, relative to the experiment file")
    weight: float = Field(gt=0, le=1_000_000, description="relative share of new dialogs")


class ExperimentConfig(BaseModel):
    """What an experiment file holds."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, description="keys the users' draw")
    arms: list[ArmConfig] = Field(min_length=2, max_length=20)

    @model_validator(mode="after")
    def _distinct_names(self) -> ExperimentConfig:
        names = [arm.name for arm in self.arms]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"arm name(s) {', '.join(doubled)} used more than once")
        return self


@dataclass(frozen=True, slots=True)
class Arm:
    """An arm with its loaded pipeline."""

    name: str
    weight: float
    path: Path
    pipeline: LoadedPipeline


@dataclass(frozen=True, slots=True)
class Experiment:
    """A validated experiment: its arms in the file's order (the first is the one a dialog
    opened before the experiment, or on an arm since removed, runs on)."""

    name: str
    arms: tuple[Arm, ...]
    source: Path
    #: ``CHORUS_ARM_KEY``: the secret the draw is keyed with besides the name (None: the
    #: name alone, which anyone can compute)
    key: bytes | None = field(default=None, repr=False)

    @property
    def names(self) -> list[str]:
        return [arm.name for arm in self.arms]

    @property
    def default(self) -> Arm:
        return self.arms[0]

    def arm(self, name: str | None) -> Arm | None:
        """The arm of that name; None when the experiment has none by that name."""
        return next((arm for arm in self.arms if arm.name == name), None)

    def arm_for(self, user_id: str) -> str:
        """The arm a new dialog of this user goes to: a point in [0, 1) drawn by a keyed
        hash (BLAKE2b keyed with the experiment's name, itself hashed under the secret
        :attr:`key` when there is one) of the user's id, placed on the arms' cumulative
        weights. Without a key the draw is the one of earlier versions, so an upgrade alone
        moves no user's next dialog."""
        secret = None if self.key is None else hashlib.blake2b(self.key).digest()
        key = hashlib.blake2b(self.name.encode(), key=secret or b"", digest_size=32).digest()
        digest = hashlib.blake2b(user_id.encode(), key=key, digest_size=8).digest()
        point = int.from_bytes(digest, "big") / 2**64 * sum(a.weight for a in self.arms)
        for arm in self.arms:
            if point < arm.weight:
                return arm.name
            point -= arm.weight
        return self.arms[-1].name  # rounding at the very end of the range

    def weights(self) -> Mapping[str, float]:
        total = sum(arm.weight for arm in self.arms)
        return {arm.name: arm.weight / total for arm in self.arms}

    def startup_lines(self) -> list[str]:
        """What the agent logs of the experiment as it starts: the experiment, how its draw
        is keyed, and per arm its share, pipeline file and services (every arm's, not only
        the first's, which the agent's other start-up lines describe), so that an operator
        reading one replica's log knows what each arm runs."""
        keyed = "CHORUS_ARM_KEY" if self.key is not None else "the name alone (no CHORUS_ARM_KEY)"
        lines = [
            f"experiment {self.name!r} ({self.source}): {len(self.arms)} arms "
            f"({', '.join(self.names)}), the draw keyed with {keyed}"
        ]
        shares = self.weights()
        for arm in self.arms:
            services = arm.pipeline.service_names(fallbacks=True)
            lines.append(
                f"experiment {self.name!r}, arm {arm.name}: {shares[arm.name]:.1%} of new "
                f"dialogs (weight {arm.weight:g}), pipeline {arm.path}, {len(services)} "
                f"services: {', '.join(services) or '(none)'}"
            )
        return lines


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


class ArmInfo(BaseModel):
    """One arm as the ``/pipeline`` page shows it."""

    name: str
    pipeline: str = Field(description="its pipeline file")
    share: float = Field(description="the share of new dialogs it gets, 0 to 1")
    turns: int = Field(description="turns answered on it by this agent process")
    fallbacks: int = Field(description="of which by the fallback response")


class ExperimentInfo(BaseModel):
    """The running experiment; the graph drawn beside it is its first arm's pipeline."""

    name: str
    arms: list[ArmInfo]


def describe_experiment(
    experiment: Experiment, counts: Mapping[str, tuple[int, int]]
) -> ExperimentInfo:
    """The experiment for the ``/pipeline`` page; ``counts``: (turns, fallbacks) by arm."""
    shares = experiment.weights()
    return ExperimentInfo(
        name=experiment.name,
        arms=[
            ArmInfo(
                name=arm.name,
                pipeline=str(arm.path),
                share=shares[arm.name],
                turns=counts.get(arm.name, (0, 0))[0],
                fallbacks=counts.get(arm.name, (0, 0))[1],
            )
            for arm in experiment.arms
        ],
    )
