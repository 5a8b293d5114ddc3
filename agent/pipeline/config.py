"""The pipeline file: one JSON document in DeepPavlov Dream's vocabulary.

    {
      "services": {
        "annotators": {"tokens": {"connector": {"url": "http://127.0.0.1:8101/respond"}}},
        "skills": {"greeting": {"connector": {"url": "...", "timeout": 1.5},
                                "context_window": 3}},
        "response_selectors": {"confidence": {"connector": {"builtin": "highest_confidence"}}}
      },
      "turn_timeout": 5.0,
      "fallback_response": "Sorry, I could not think of an answer."
    }

Everything is checked when the agent starts; :class:`PipelineConfigError` names the bad entry
by its path (``services.skills.greeting.connector``) so the fix is obvious.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from agent.connectors.handler_threads import DEFAULT_THREADS
from agent.sdk.roles import ROLES, Role
from agent.turn.config import DoubleTexting, HandoffConfig, PipelineConfigError

ServiceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
BuiltinName = Literal["highest_confidence", "all_skills"]
#: A Python module path, maybe with ``:attribute`` (as uvicorn names an app).
ModuleTarget = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$"
    ),
]


class ConnectorConfig(BaseModel):
    """How the agent reaches a service: an HTTP endpoint, an SDK service's module called in
    the agent's process, or a built-in."""

    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl | None = None
    module: ModuleTarget | None = Field(
        default=None,
        description="an SDK service called in the agent's process, without HTTP: "
        'its module ("annotators.intents.app", whose `service` is used) or '
        '"module:attribute"; for cheap services only, since it shares the agent\'s CPU',
    )
    builtin: BuiltinName | None = None
    timeout: float = Field(default=2.0, gt=0, le=600, description="seconds per call")
    batch_size: int = Field(default=1, ge=1, le=1024, description="dialogs per HTTP call")
    retries: int = Field(
        default=1, ge=0, le=3, description="retries of a call whose connection could not be opened"
    )
    threads: int = Field(
        default=DEFAULT_THREADS,
        ge=1,
        le=64,
        description="an in-process service's sync handler: threads that may still be running "
        "a call (one given up at its timeout runs on); past them, calls fail as unavailable",
    )
    breaker_threshold: int = Field(
        default=5, ge=0, le=1000, description="failures in a row that open the circuit (0: never)"
    )
    breaker_reset: float = Field(
        default=10.0, gt=0, le=3600, description="seconds an open circuit waits before a trial"
    )
    protocol: Literal["chorus", "parlai"] = Field(
        default="chorus",
        description="chorus: a batch of dialog views per POST; parlai: "
        "one ParlAI observation per POST, answered by an act (skills only)",
    )

    @model_validator(mode="after")
    def _one_target(self) -> ConnectorConfig:
        targets = [key for key in ("url", "module", "builtin") if getattr(self, key) is not None]
        if not targets:
            raise ValueError(
                'missing url: set "url" to the service\'s HTTP endpoint '
                '(e.g. "http://127.0.0.1:8101/respond"), "module" to an SDK service\'s '
                'module to call it in the agent\'s process, or "builtin" to a built-in service'
            )
        if len(targets) > 1:
            raise ValueError(f"set only one of {' and '.join(map(repr, targets))}")
        if self.protocol == "parlai" and self.url is None:
            raise ValueError('protocol "parlai" needs a "url"')
        if "threads" in self.model_fields_set and self.module is None:
            raise ValueError(
                '"threads" bounds a service called in the agent\'s process: set it with "module"'
            )
        return self


class TokenBudget(BaseModel):
    """How many tokens an LLM skill may spend, as its service reports them (OpenAI's
    ``usage``): a call past a spent budget is not made, and the skill is told the most it
    may spend this turn (``max_tokens`` of its dialog view), which it holds from the day's
    count while it runs (:mod:`agent.pipeline.budgets`)."""

    model_config = ConfigDict(extra="forbid")

    per_turn: int | None = Field(default=None, ge=1, description="tokens one call may spend")
    per_dialog: int | None = Field(default=None, ge=1, description="tokens over one dialog")
    per_user: int | None = Field(
        default=None,
        ge=1,
        description="tokens one user may spend per UTC day over all their dialogs, counted "
        "in the user's attributes",
    )
    per_day: int | None = Field(
        default=None, ge=1, description="tokens per UTC day, counted by each agent process"
    )


class ServiceConfig(BaseModel):
    """One service of the pipeline."""

    model_config = ConfigDict(extra="forbid")

    connector: ConnectorConfig
    previous_services: list[str] = Field(
        default_factory=list, description="services or groups that must finish first"
    )
    required_previous_services: list[str] = Field(
        default_factory=list,
        description="as previous_services, and this one is skipped when any of them failed",
    )
    context_window: int = Field(default=3, ge=1, le=100, description="utterances sent")
    is_enabled: bool = True
    requires_env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list,
        description="environment variables that must be set (non-empty) "
        "for the service to run, e.g. an LLM skill's endpoint: unset, it is off",
    )
    tags: list[str] = Field(default_factory=list)
    stream: bool = Field(
        default=False,
        description="a skill that streams its text (an async generator with the SDK): "
        "called for a streamed answer, its tokens reach a listening client when its "
        "answer is certain to be chosen",
    )

    stream_min_confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="a streaming skill that announces at least this confidence before its "
        "text answers the turn (the first to announce, if several do): its tokens reach a "
        "listening client and the response selector is not asked",
    )

    tier: int = Field(
        default=0,
        ge=0,
        le=9,
        description="a skill's tier: skills of tier 0 run at once; a skill of a higher tier "
        "runs only when no skill of a lower tier answered with at least its run_below",
    )
    run_below: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="a tiered skill runs only when every hypothesis of the lower tiers is "
        "below this confidence",
    )
    speculative: bool = Field(
        default=False,
        description="a tiered skill starts with tier 0 instead of after it, and is dropped "
        "the moment a lower tier answers with at least its run_below",
    )
    budget: TokenBudget | None = Field(
        default=None, description="the tokens an LLM skill may spend (per turn, dialog, day)"
    )

    @model_validator(mode="after")
    def _tiered(self) -> ServiceConfig:
        if self.tier > 0 and self.run_below is None:
            raise ValueError(
                f'"tier": {self.tier} needs "run_below": the confidence a lower tier\'s '
                "answer must reach for this skill not to run (e.g. 0.5)"
            )
        if self.tier == 0 and self.run_below is not None:
            raise ValueError('"run_below" needs "tier" of 1 or more')
        if self.speculative and self.tier == 0:
            raise ValueError('"speculative": true needs "tier" of 1 or more')
        if self.speculative and self.stream_min_confidence is not None:
            raise ValueError(
                '"speculative": true cannot go with "stream_min_confidence": a claimed '
                "stream sends its tokens at once, and a speculative skill may still be "
                "dropped after them; leave stream_min_confidence out (a tiered skill's "
                "tokens are sent once its answer is sure)"
            )
        return self

    @model_validator(mode="after")
    def _stream_over_http(self) -> ServiceConfig:
        streams = self.connector.module is not None or (
            self.connector.url is not None and self.connector.protocol == "chorus"
        )
        if self.stream and not streams:
            raise ValueError('"stream": true needs a "url" with the chorus protocol, or a "module"')
        if self.stream_min_confidence is not None and not self.stream:
            raise ValueError('"stream_min_confidence" needs "stream": true')
        return self

    def off_because(self) -> str | None:
        """Why the service is not part of the pipeline now, or None when it is."""
        if not self.is_enabled:
            return "is_enabled: false"
        missing = [name for name in self.requires_env if not os.environ.get(name)]
        if missing:
            return f"requires_env: {', '.join(missing)} not set"
        return None


class PipelineConfig(BaseModel):
    """The whole file."""

    model_config = ConfigDict(extra="forbid")

    services: dict[Role, dict[ServiceName, ServiceConfig]]
    turn_timeout: float = Field(default=10.0, gt=0, le=600, description="whole-turn deadline")
    fallback_response: str = Field(
        default="Sorry, I don't have an answer for that right now.", min_length=1
    )
    double_texting: DoubleTexting = Field(
        default="enqueue",
        description="a message arriving while one of its user is answered: enqueue (wait), "
        "reject (409), interrupt (cancel the running turn)",
    )
    handoff: HandoffConfig | None = Field(
        default=None, description="dialogs may be handed to a person (docs/handoff.md)"
    )

    @model_validator(mode="after")
    def _unique_names(self) -> PipelineConfig:
        seen: dict[str, str] = {}
        for group, services in self.services.items():
            for name in services:
                if name in ROLES:
                    raise ValueError(
                        f"services.{group}.{name}: a service cannot be named like a group"
                    )
                if name in seen:
                    raise ValueError(
                        f"services.{group}.{name}: the name is already used in "
                        f"services.{seen[name]}; service names must be unique"
                    )
                seen[name] = group
        return self


def _describe(error: ValidationError) -> str:
    """Pydantic's errors, as one line per bad entry with its dotted path."""
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {message}" if path else message)
    return "; ".join(lines)


def parse_pipeline_config(data: object, source: str = "pipeline config") -> PipelineConfig:
    """Validate an already-parsed pipeline document."""
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise PipelineConfigError(f"{source}: {_describe(exc)}") from None


def load_pipeline_config(path: Path) -> PipelineConfig:
    """Read and validate the pipeline file; every failure names the file and the entry."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PipelineConfigError(f"cannot read pipeline config {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PipelineConfigError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return parse_pipeline_config(data, source=str(path))
