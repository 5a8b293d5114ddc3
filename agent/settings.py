"""The agent's settings, from ``CHORUS_*`` environment variables (or a ``.env`` file).

Each group of settings is the domain's own type, nested: ``settings.retention`` is the
:class:`Retention` the sweep and the stores take, ``settings.limits`` the
:class:`StorageLimits` every stored value is held to. Only what an operator has a reason to
choose is a variable (:data:`VARIABLES`); tuning knobs are constants of the module that uses
them. Bad values, and a variable that is no longer read (:data:`REMOVED`), stop the agent at
start-up with :class:`SettingsError`, naming the variable.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agent.sdk.errors import ConfigError
from agent.state.storage_limits import StorageLimits
from agent.store.base import Retention

ENV_PREFIX = "CHORUS_"

#: Variables whose value is a field of a nested domain type: name (without the prefix) ->
#: (the settings' field, the type's field). They are read as numbers of seconds.
NESTED = {
    "RETAIN_CLOSED_DIALOGS": ("retention", "closed_dialogs"),
    "CLOSE_IDLE_DIALOGS": ("retention", "idle_dialogs"),
    "COMPACT_TURNS_AFTER": ("retention", "compact_turns"),
}

#: The settings' fields that are nested domain types, never read from one variable of their
#: own (``CHORUS_LIMITS`` holding JSON is not a setting).
NESTED_FIELDS = frozenset({"retention", "limits"})

#: Variables the agent no longer reads (without the prefix) -> what to do instead. One that
#: is still set stops the agent: it would otherwise be ignored without a word.
REMOVED = {
    "TURN_LEASE": "set CHORUS_QUEUE_LEASE instead (same meaning)",
    "LINE_LEASE": "set CHORUS_QUEUE_LEASE instead (same meaning)",
    "LINE_WAIT": "a constant now (QUEUE_WAIT in agent/queues.py, 60 s): unset it",
    "KEY_RETENTION": "a constant now (KEY_RETENTION in agent/idempotency.py, a day): unset it",
    "RETRY_WINDOW": "a constant now (RETRY_WINDOW in agent/flow.py, 300 s): unset it",
    "END_RETRY": "a constant now (END_RETRY in agent/flow.py, 10 s): unset it",
    "SWEEP_INTERVAL": "a constant now (SWEEP_INTERVAL in agent/lifecycle.py, 60 s): unset it",
    "SWEEP_BATCH": "a constant now (SWEEP_BATCH in agent/lifecycle.py, 100): unset it",
    "MAX_HEADER_BYTES": "a constant now (MAX_HEADER_BYTES in agent/api/serve.py, 65536): unset it",
    "TRACE_USER_IDS": "spans always carry a keyed hash of the user id, never the id "
    "(agent/telemetry/turns.py): unset it",
    "MAX_IMAGE_BYTES": "a constant now (MAX_IMAGE_BYTES in agent/state/storage_limits.py, "
    "1000000): unset it",
    "MAX_JSON_DEPTH": "a constant now (MAX_JSON_DEPTH in agent/state/storage_limits.py, 32): "
    "unset it",
    "MAX_JSON_ITEMS": "a constant now (MAX_JSON_ITEMS in agent/state/storage_limits.py, 10000): "
    "unset it",
    "MAX_VALUE_BYTES": "a constant now (MAX_VALUE_BYTES in agent/state/storage_limits.py, 262144): "
    "unset it",
    "MAX_DOCUMENT_BYTES": "a constant now (MAX_DOCUMENT_BYTES in agent/state/storage_limits.py, "
    "4000000): unset it",
    "MAX_ATTRIBUTE_KEYS": "a constant now (MAX_ATTRIBUTE_KEYS in agent/state/storage_limits.py, "
    "1000): unset it",
    "MAX_RATING_BYTES": "a constant now (MAX_RATING_BYTES in agent/state/storage_limits.py, 4096): "
    "unset it",
    "MAX_RATINGS": "a constant now (MAX_RATINGS in agent/state/storage_limits.py, 100): unset it",
    "DREAM_WINDOW": "a constant now (DEFAULT_WINDOW in agent/dream/graph.py, 40): unset it",
    "MAX_USER_ID_LENGTH": "a constant now (MAX_USER_ID_LENGTH in agent/state/storage_limits.py, "
    "256): unset it",
    "HEADER_TIMEOUT": "a constant now (HEADER_TIMEOUT in agent/api/serve.py, 10 s): unset it",
    "WEBSOCKET_IDLE_TIMEOUT": "a constant now (WEBSOCKET_IDLE_TIMEOUT in agent/api/serve.py, "
    "300 s): unset it",
    "MAX_WEBSOCKETS": "WebSockets may hold half of CHORUS_MAX_CONNECTIONS (agent/api/serve.py): "
    "unset it, and set CHORUS_MAX_CONNECTIONS to twice the WebSockets wanted",
    "DIALOG_VIEW": "set CHORUS_DIALECT instead (the same values; it chooses the answer to "
    "/start and /close too)",
    "COMMAND_REPLY": "set CHORUS_DIALECT instead (the same values; it chooses the dialog "
    "reads' shape too)",
}


class SettingsError(ConfigError):
    """A setting is wrong; the message names the environment variable."""


def _seconds(value: str) -> float | str:
    """A number of seconds as a float (a timedelta is read from a number, not from text);
    anything else as it is, for the validation error to name."""
    try:
        return float(value)
    except ValueError:
        return value


class _NestedVariables(PydanticBaseSettingsSource):
    """Reads :data:`NESTED`'s variables, from the environment or the ``.env`` file, into the
    nested types' fields, keeping the names users set."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self._found = {
            **DotEnvSettingsSource(settings_cls).env_vars,
            **EnvSettingsSource(settings_cls).env_vars,
        }

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything is read in __call__

    def __call__(self) -> dict[str, Any]:
        groups: dict[str, dict[str, Any]] = {}
        for name, (group, field) in NESTED.items():
            value = self._found.get(f"{ENV_PREFIX}{name}".lower())
            if value is not None and value != "":
                groups.setdefault(group, {})[field] = _seconds(value)
        return groups


class WithoutNested(PydanticBaseSettingsSource):
    """A source (the environment, ``.env``) without the nested fields: ``CHORUS_LIMITS``
    holding JSON would be a variable no one documented, so it is not read."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        inner: PydanticBaseSettingsSource,
        nested: frozenset[str],
    ) -> None:
        super().__init__(settings_cls)
        self._inner = inner
        self._nested = nested

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything is read in __call__

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._inner().items() if k not in self._nested}


def removed_variables(
    settings_cls: type[BaseSettings], prefix: str, removed: Iterable[str]
) -> list[str]:
    """The names of ``removed`` (without ``prefix``) set in the environment or ``.env``."""
    found = {
        **DotEnvSettingsSource(settings_cls).env_vars,
        **EnvSettingsSource(settings_cls).env_vars,
    }
    return [name for name in removed if f"{prefix}{name}".lower() in found]


def refuse_removed(settings_cls: type[BaseSettings], prefix: str, removed: dict[str, str]) -> None:
    """:class:`SettingsError` naming each of ``removed`` still set, and what to do instead:
    a variable that is no longer read must not be ignored without a word."""
    names = removed_variables(settings_cls, prefix, removed)
    if names:
        raise SettingsError(
            "bad settings: "
            + "; ".join(f"{prefix}{name} is no longer read: {removed[name]}" for name in names)
        )


class Settings(BaseSettings):
    """Everything the agent reads from its environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            WithoutNested(settings_cls, env_settings, NESTED_FIELDS),
            WithoutNested(settings_cls, dotenv_settings, NESTED_FIELDS),
            _NestedVariables(settings_cls),
        )

    db_url: str = Field(
        default="sqlite:///data/chorus.db",
        description="sqlite:///path/file.db, or mongodb://host:27017/chorus",
    )
    pipeline: Path = Field(default=Path("pipeline.json"), description="pipeline config file")
    experiment: Path | None = Field(
        default=None,
        description="an experiment file naming two or more pipeline files (arms) with weights; "
        "when set, each new dialog runs on one of them and CHORUS_PIPELINE is not read",
    )
    max_text_length: int = Field(
        default=4096, ge=1, le=1_000_000, description="longest accepted user message, in characters"
    )
    max_body_bytes: int = Field(
        default=2_000_000, ge=1024, le=100_000_000, description="largest accepted request body"
    )
    max_connections: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="open connections per agent process; past it new ones get 503 "
        "(unset: the open-file limit less room for the agent's own sockets, at most 4096); "
        "WebSockets may hold half of them",
    )
    api_key: SecretStr | None = Field(
        default=None, description="X-API-Key for reading dialogs and users"
    )
    metrics_public: bool = Field(
        default=False,
        description="GET /metrics and the load numbers of /debug/current_load (JSON and its "
        "WebSocket) are open to all; false: they need api_key, when it is set",
    )
    protect_chat: bool = Field(default=False, description="the chat endpoints need the key too")
    operator_key: SecretStr | None = Field(
        default=None,
        description="X-Operator-Key of the operator routes (/api/operator/...): reading and "
        "writing dialogs handed to a person, nothing else; not the API key, which never "
        "opens them; also the secret the helpdesk webhook is signed with. Unset: the "
        "operator routes answer 403 (docs/handoff.md)",
    )
    cors_origins: list[str] = Field(
        default_factory=list, description='origins allowed by CORS, e.g. ["https://x.org"]'
    )
    channel_type: str = Field(default="http_client", min_length=1)
    queue_lease: float = Field(
        default=10.0,
        ge=0.5,
        le=600,
        description="seconds a message keeps its place in its "
        "user's queue without a heartbeat: how long an agent that died mid-turn holds up the "
        "user's next message",
    )
    retention: Retention = Field(
        default_factory=Retention,
        description="the data lifecycle's rules, each off unless its variable is set: "
        "CHORUS_RETAIN_CLOSED_DIALOGS, CHORUS_CLOSE_IDLE_DIALOGS, CHORUS_COMPACT_TURNS_AFTER "
        "(seconds)",
    )
    limits: StorageLimits = Field(
        default_factory=StorageLimits,
        description="what may be stored: constants (agent/state/storage_limits.py), not variables",
    )
    log_level: str = Field(default="INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$")
    # A dp-agent (Dream) pipeline file carries no agent settings of its own: these apply.
    dream_turn_timeout: float | None = Field(
        default=None,
        ge=0,
        le=600,
        description="seconds before a dp-agent pipeline's timeout service answers (dp-agent's "
        "response_time_limit); unset or 0 (read as unset): no deadline for the whole turn, "
        "each service bounded by its own timeout, as dp-agent runs Dream",
    )

    dialect: Literal["chorus", "dp-agent"] | None = Field(
        default=None,
        description="the shape of replies and reads for dp-agent clients: dp-agent's, or "
        "Chorus's, where the two differ: what GET /api/dialogs/{id} and /api/user/{id} "
        "answer in when the request does not say (?view=), and what POST / answers to "
        "/start and /close (Chorus's reply naming the closed dialog, or dp-agent's {}); "
        "unset: the pipeline file's (dp-agent's for a dp-agent pipeline file, else Chorus's)",
    )

    log_format: Literal["text", "json"] = Field(
        default="text",
        description="json: one object per line, with the turn's dialog_id, "
        "utt_id and trace_id (docs/observability.md)",
    )
    trace_id_key: SecretStr | None = Field(
        default=None,
        description="the secret key of the user id hash in traces (HMAC-SHA256), the same "
        "on every replica so a user's hash is one across them; unset, each process makes a "
        "random one (docs/observability.md)",
    )
    arm_key: SecretStr | None = Field(
        default=None,
        description="the secret key of the experiment arms' draw, the same on every replica "
        "so a user's draw is one across them; unset, the draw is keyed with the experiment's "
        "name alone, and anyone who knows the name can choose an arm by choosing a user id "
        "(docs/experiments.md)",
    )
    ready_services: list[str] = Field(
        default_factory=list,
        description="services GET /ready also needs reachable, e.g. "
        '["tokens"], besides those another service requires (required_previous_services)',
    )

    @field_validator("db_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite://", "mongodb://", "mongodb+srv://")):
            raise ValueError("use sqlite:///data/chorus.db or mongodb://host:27017/chorus")
        return value

    @field_validator("dream_turn_timeout")
    @classmethod
    def _zero_is_none(cls, value: float | None) -> float | None:
        """0 says "no deadline" as unset does (dp-agent's habit): the deadline is None."""
        return value or None

    def trace_id_key_bytes(self) -> bytes | None:
        """``CHORUS_TRACE_ID_KEY`` as the HMAC's key, or None when it is unset."""
        key = self.trace_id_key
        return None if key is None else key.get_secret_value().encode()

    def arm_key_bytes(self) -> bytes | None:
        """``CHORUS_ARM_KEY`` as the draw's key, or None when it is unset."""
        key = self.arm_key
        return None if key is None else key.get_secret_value().encode()

    @field_validator("api_key", "trace_id_key", "arm_key", "operator_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters long (e.g. `openssl rand -hex 16`)")
        return value

    @model_validator(mode="after")
    def _chat_protection_needs_a_key(self) -> Settings:
        if self.protect_chat and self.api_key is None:
            raise ValueError("protect_chat is true but api_key is not set")
        return self

    @model_validator(mode="after")
    def _operator_key_is_its_own(self) -> Settings:
        """An operator key equal to the API key would let every reader (and, with
        protect_chat, every chat client) act as an operator."""
        if (
            self.operator_key is not None
            and self.api_key is not None
            and self.operator_key.get_secret_value() == self.api_key.get_secret_value()
        ):
            raise ValueError("operator_key must not be the same as api_key")
        return self


#: The variables the agent reads: its plain fields' and :data:`NESTED`'s.
VARIABLES = sorted(
    [f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields if name not in NESTED_FIELDS]
    + [f"{ENV_PREFIX}{name}" for name in NESTED]
)


def _variable(loc: tuple[int | str, ...], message: str = "") -> str:
    """The variable a validation error's location is read from; for a check of several
    settings (no location), the one its message starts with."""
    if not loc:
        field = message.removeprefix("Value error, ").split(" ", 1)[0]
        return (
            f"{ENV_PREFIX}{(field if field in Settings.model_fields else 'protect_chat').upper()}"
        )
    if len(loc) > 1:
        for name, path in NESTED.items():
            if path == (loc[0], loc[1]):
                return f"{ENV_PREFIX}{name}"
    return f"{ENV_PREFIX}{str(loc[0]).upper()}"


def load_settings() -> Settings:
    """Read the settings, or fail with the bad variable's name in the message."""
    refuse_removed(Settings, ENV_PREFIX, REMOVED)
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{_variable(e['loc'], e['msg'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise SettingsError(f"bad settings: {problems}") from None
