"""dp-agent's pipeline file (Dream's ``assistant_dists/*/pipeline_conf.json``), validated.

    {"connectors": {"sentseg": {"protocol": "http", "url": "http://sentseg:8011/sentseg"}},
     "services": {
       "last_chance_service": {"connector": {"protocol": "python",
                                             "class_name": "PredefinedTextConnector",
                                             "response_text": "Sorry..."},
                               "state_manager_method": "add_bot_utterance_last_chance",
                               "tags": ["last_chance"]},
       "annotators": {"sentseg": {"connector": "sentseg",
                                  "dialog_formatter": "state_formatters.dp_formatters:...",
                                  "state_manager_method": "add_annotation"}},
       ...},
     "metadata": {...}}

A top-level entry with a ``connector`` is one service; any other is a group of services.
Errors name the entry by its path (``services.skills.eliza.connector.url``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.turn.config import PipelineConfigError

#: dp-agent's StateManager / ExtendedStateManager methods a service may name.
STATE_MANAGER_METHODS = frozenset(
    {
        "add_annotation",
        "add_annotation_prev_bot_utt",
        "add_hypothesis",
        "add_hypothesis_annotation",
        "add_hypothesis_annotation_batch",
        "add_text",
        "add_bot_utterance",
        "add_bot_utterance_last_chance",
        "add_bot_utterance_last_chance_overwrite",
        "add_failure_bot_utterance",
        "update_attributes",
        "add_annotation_and_reset_human_attributes_for_first_turn",
        "save_dialog",
    }
)

Tag = Literal["selector", "responder", "input", "last_chance", "timeout"]


class HttpConnectorConfig(BaseModel):
    """``protocol: http``: POST the formatter's payload, read a JSON list back."""

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["http"]
    url: AnyHttpUrl | None = None
    urllist: list[AnyHttpUrl] | None = Field(default=None, min_length=1)
    timeout: float = Field(
        default=0, ge=0, le=600, description="seconds per call; 0: only the turn's deadline"
    )
    batch_size: int = Field(default=1, ge=1, le=1024)
    num_workers: int = Field(default=1, ge=1, le=64)
    connector_name: str | None = None

    @model_validator(mode="after")
    def _has_url(self) -> HttpConnectorConfig:
        if self.url is None and not self.urllist:
            raise ValueError('missing url: set "url" to the service\'s HTTP endpoint')
        return self

    @property
    def urls(self) -> list[str]:
        if self.urllist:
            return [str(u) for u in self.urllist]
        return [str(self.url)] * self.num_workers

    @property
    def batches(self) -> bool:
        """dp-agent queues and merges payloads when any of these keys is given."""
        return self.batch_size > 1 or self.urllist is not None or self.num_workers > 1


class PythonConnectorConfig(BaseModel):
    """``protocol: python``: a class from the Python path (``module:Class``) or one of
    dp-agent's built-in names; every other key is passed to its constructor."""

    model_config = ConfigDict(extra="allow")

    protocol: Literal["python"]
    class_name: str = Field(min_length=1)

    def kwargs(self) -> dict[str, Any]:
        return {k: v for k, v in (self.model_extra or {}).items() if k != "connector_name"}


ConnectorConfig = HttpConnectorConfig | PythonConnectorConfig


class FormatterRef(BaseModel):
    """``{"name": "module:function", **kwargs}``: the function with those keyword arguments."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)


class DpService(BaseModel):
    """One service entry."""

    model_config = ConfigDict(extra="forbid")

    connector: str | ConnectorConfig
    dialog_formatter: str | FormatterRef | None = None
    response_formatter: str | FormatterRef | None = None
    previous_services: list[str] = Field(default_factory=list)
    required_previous_services: list[str] = Field(default_factory=list)
    state_manager_method: str | None = None
    tags: list[Tag] = Field(default_factory=list)
    is_enabled: bool = True
    source: Any = Field(default=None, description="Dream's build metadata; ignored")
    workflow_formatter: None = Field(
        default=None,
        description="dp-agent's switch to pass "
        "the workflow record instead of the dialog; only null",
    )

    @field_validator("state_manager_method")
    @classmethod
    def _known_method(cls, method: str | None) -> str | None:
        if method is not None and method not in STATE_MANAGER_METHODS:
            known = ", ".join(sorted(STATE_MANAGER_METHODS))
            raise ValueError(
                f"{method!r} is not a dp-agent state manager method; use one of {known}"
            )
        return method


class DpConfig(BaseModel):
    """The whole file; ``services`` is checked entry by entry in :func:`parse_dp_config`."""

    model_config = ConfigDict(extra="forbid")

    connectors: dict[str, ConnectorConfig] = Field(default_factory=dict)
    services: dict[str, dict[str, Any]]
    metadata: Any = None
    connectors_module: str | None = None
    formatters_module: str | None = None


class ParsedService(BaseModel):
    """A service with its place: ``group`` is None for a top-level service."""

    group: str | None
    label: str
    config: DpService

    @property
    def name(self) -> str:
        """dp-agent's service name: ``group.label``, or the label alone at top level."""
        return f"{self.group}.{self.label}" if self.group else self.label

    @property
    def where(self) -> str:
        return f"services.{self.name}"


def is_dp_agent_config(data: object) -> bool:
    """Whether a parsed pipeline document is dp-agent's format rather than Chorus's.

    dp-agent's has top-level ``connectors`` or ``metadata``, a service at top level, a
    connector named by string or with ``protocol`` ``http``/``python``, or a formatter or
    ``state_manager_method``; Chorus's has none of these.
    """
    if not isinstance(data, dict):
        return False
    if "connectors" in data or "metadata" in data:
        return True
    services = data.get("services")
    if not isinstance(services, dict):
        return False
    dp_keys = {"dialog_formatter", "response_formatter", "state_manager_method"}
    for entry in services.values():
        if not isinstance(entry, dict):
            continue
        if "connector" in entry:
            return True
        for service in entry.values():
            if not isinstance(service, dict):
                continue
            connector = service.get("connector")
            if isinstance(connector, str) or dp_keys & set(service):
                return True
            if isinstance(connector, dict) and connector.get("protocol") in ("http", "python"):
                return True
    return False


def _describe(error: ValidationError, prefix: str) -> str:
    lines = []
    for item in error.errors():
        path = ".".join(str(p) for p in (prefix, *item["loc"]) if p != "")
        # A union's branch name (e.g. "FormatterRef") in the path helps nobody.
        path = ".".join(p for p in path.split(".") if p not in ("str", "FormatterRef"))
        lines.append(f"{path}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(dict.fromkeys(lines))


def connector_model(data: Any, where: str) -> ConnectorConfig:
    """One connector definition, checked by the model its ``protocol`` names."""
    if not isinstance(data, dict):
        raise PipelineConfigError(
            f"{where}: a connector must be an object with a "
            '"protocol", or the name of a top-level connector'
        )
    protocol = data.get("protocol")
    model: type[HttpConnectorConfig] | type[PythonConnectorConfig]
    if protocol == "http":
        model = HttpConnectorConfig
    elif protocol == "python":
        model = PythonConnectorConfig
    else:
        raise PipelineConfigError(
            f'{where}.protocol: {protocol!r} is not supported; use "http" (a service\'s '
            'URL) or "python" (a class_name)'
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise PipelineConfigError(_describe(exc, where)) from None


def _service(data: Any, where: str) -> DpService:
    if not isinstance(data, dict):
        raise PipelineConfigError(f'{where}: a service must be an object with a "connector"')
    if "connector" not in data:
        raise PipelineConfigError(
            f"{where}.connector: missing; give the service a connector "
            "(an object, or the name of a top-level connector)"
        )
    if not isinstance(data["connector"], str):
        data = {**data, "connector": connector_model(data["connector"], f"{where}.connector")}
    try:
        return DpService.model_validate(data)
    except ValidationError as exc:
        raise PipelineConfigError(_describe(exc, where)) from None


def parse_dp_config(data: object, source: str) -> tuple[DpConfig, list[ParsedService]]:
    """Validate the document; every service with its group, in file order."""
    try:
        if isinstance(data, dict) and isinstance(data.get("connectors"), dict):
            data = {
                **data,
                "connectors": {
                    name: connector_model(connector, f"connectors.{name}")
                    for name, connector in data["connectors"].items()
                },
            }
        config = DpConfig.model_validate(data)
    except ValidationError as exc:
        raise PipelineConfigError(f"{source}: {_describe(exc, '')}") from None
    except PipelineConfigError as exc:
        raise PipelineConfigError(f"{source}: {exc}") from None
    services: list[ParsedService] = []
    try:
        for key, entry in config.services.items():
            if "connector" in entry:
                services.append(
                    ParsedService(group=None, label=key, config=_service(entry, f"services.{key}"))
                )
                continue
            for label, item in entry.items():
                where = f"services.{key}.{label}"
                services.append(ParsedService(group=key, label=label, config=_service(item, where)))
    except PipelineConfigError as exc:
        raise PipelineConfigError(f"{source}: {exc}") from None
    return config, services
