"""Pipeline arms: an experiment runs two or more pipeline files side by side, each dialog
on one of them, and :class:`ArmChooser` is the executor that runs each turn on its
dialog's arm: the message flow holds it as it would hold one pipeline's executor, and
knows nothing of experiments.

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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent.turn.base import LoadedPipeline, PipelineGraph, TurnExecutor
from agent.turn.value import Turn, TurnResult

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


class ArmChooser:
    """The executor of an experiment: each turn runs on its dialog's arm (the first arm
    for a dialog opened before the experiment, or on an arm since removed), with that
    arm's history window; a new dialog's arm is drawn by :meth:`Experiment.arm_for`."""

    def __init__(self, experiment: Experiment, executors: Mapping[str, TurnExecutor]) -> None:
        missing = set(experiment.names) - set(executors)
        if missing:
            raise ValueError(f"no executor for arm(s) {', '.join(sorted(missing))}")
        self.experiment = experiment
        self._executors = executors
        self._default = executors[experiment.default.name]
        self._window = max(e.history_window for e in executors.values())
        self._whole = any(e.whole_history for e in executors.values())

    @property
    def pipeline(self) -> PipelineGraph:
        """The first arm's pipeline: its double-texting policy is the agent's."""
        return self._default.pipeline

    @property
    def history_window(self) -> int:
        """The longest of the arms' windows: a dialog's arm is known once it is read."""
        return self._window

    @property
    def whole_history(self) -> bool:
        """Whether any arm shows past utterances whole: a dialog's arm is known once it
        is read."""
        return self._whole

    def arm_for(self, user_id: str) -> str:
        return self.experiment.arm_for(user_id)

    async def run(self, turn: Turn) -> TurnResult:
        executor = self._executors.get(turn.arm or "", self._default)
        window = max(executor.history_window, 1)
        if len(turn.history) > window:
            turn = replace(turn, history=turn.history[-window:])
        return await executor.run(turn)


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
