"""The agent's settings, from ``CHORUS_*`` environment variables (or a ``.env`` file).

Bad values stop the agent at start-up with :class:`SettingsError`, naming the variable.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.sdk.errors import ConfigError
from agent.state.limits import StorageLimits
from agent.store.base import DEFAULT_KEY_RETENTION, Retention

ENV_PREFIX = "CHORUS_"


class SettingsError(ConfigError):
    """A setting is wrong; the message names the environment variable."""


class Settings(BaseSettings):
    """Everything the agent reads from its environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

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
    max_image_bytes: int = Field(
        default=1_000_000, ge=0, le=50_000_000, description="largest base64 image in an observation"
    )
    max_body_bytes: int = Field(
        default=2_000_000, ge=1024, le=100_000_000, description="largest accepted request body"
    )
    max_header_bytes: int = Field(
        default=65_536,
        ge=4096,
        le=1_048_576,
        description="largest request line plus headers; larger ones get 431",
    )
    header_timeout: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="seconds a request's headers may take from their first byte; then a 408",
    )
    max_connections: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="open connections per agent process; past it new ones get 503 "
        "(unset: the open-file limit less room for the agent's own sockets, at most 4096)",
    )
    max_websockets: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="WebSockets open at once per agent process, a share of max_connections "
        "kept from plain HTTP clients; past it an upgrade gets 503 (unset: half of "
        "max_connections)",
    )
    websocket_idle_timeout: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="seconds a WebSocket may go without a message either way while the "
        "agent waits for the client (pings do not count); then it is closed with 1001",
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
    cors_origins: list[str] = Field(
        default_factory=list, description='origins allowed by CORS, e.g. ["https://x.org"]'
    )
    channel_type: str = Field(default="http_client", min_length=1)
    line_lease: float = Field(
        default=10.0,
        ge=0.5,
        le=600,
        description="seconds a message keeps its place in its "
        "user's line without a heartbeat: how long an agent that died mid-turn holds up the "
        "user's next message",
    )
    turn_lease: float | None = Field(
        default=None,
        ge=0.5,
        le=600,
        description="deprecated: the old name of line_lease, "
        "still read (with a DeprecationWarning) when line_lease is not set",
    )
    line_wait: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="seconds a message waits for the same user's earlier messages before a 503",
    )
    max_json_depth: int = Field(
        default=32,
        ge=1,
        le=64,
        description="deepest nesting of objects and lists stored from a client or a service",
    )
    max_json_items: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="most object members and list items in one stored value",
    )
    max_value_bytes: int = Field(
        default=262_144,
        ge=1024,
        le=8_000_000,
        description="largest output one service may have stored per turn, as JSON",
    )
    max_document_bytes: int = Field(
        default=4_000_000,
        ge=65_536,
        le=12_000_000,
        description="largest stored utterance, as JSON (MongoDB refuses documents over 16 MB)",
    )
    max_attribute_keys: int = Field(
        default=1_000,
        ge=1,
        le=100_000,
        description="most keys a user's or a bot's attributes may hold",
    )
    max_rating_bytes: int = Field(
        default=4096,
        ge=16,
        le=8192,
        description="largest rating value POST /rating/* takes, as JSON",
    )
    max_ratings: int = Field(
        default=100,
        ge=1,
        le=500,
        description="most ratings kept per dialog and per bot answer; past it a rating "
        "gets 409 (nothing stored is dropped)",
    )
    retry_window: float = Field(
        default=300.0,
        ge=0,
        le=86_400,
        description="seconds during "
        "which a message sent again after an unanswered attempt (a "
        "503, a dead agent) answers that attempt instead of storing "
        "it twice",
    )
    end_retry: float = Field(
        default=10.0,
        ge=0,
        le=300,
        description="seconds during which a turn's end that the database going away cut "
        "short is written again (completing what it stored, never twice) before the "
        "client gets 503",
    )
    key_retention: float = Field(
        default=DEFAULT_KEY_RETENTION,
        gt=0,
        le=30 * 86_400,
        description="seconds an idempotency key and its copy of the reply are kept; after "
        "that the same key is a new message (keep it well above how long clients retry)",
    )
    retain_closed_dialogs: float | None = Field(
        default=None,
        gt=0,
        le=100 * 365 * 86_400,
        description="seconds a closed dialog is kept, then deleted whole (the dialog, its "
        "utterances and their ratings); unset: for ever",
    )
    close_idle_dialogs: float | None = Field(
        default=None,
        gt=0,
        le=100 * 365 * 86_400,
        description="seconds an open dialog may go without a message before it is closed "
        "(the user's next message opens a new one); unset: never",
    )
    compact_turns_after: float | None = Field(
        default=None,
        gt=0,
        le=100 * 365 * 86_400,
        description="seconds after which a stored turn loses every hypothesis but the "
        "chosen one, its annotations, trace and errors (texts, the chosen answer, its skill "
        "and ratings stay); unset: never",
    )
    sweep_interval: float = Field(
        default=60.0,
        ge=0.01,
        le=86_400,
        description="seconds between two passes of the data lifecycle's sweep (only runs "
        "when a retention setting is set)",
    )
    sweep_batch: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="records each rule of the sweep looks at per pass: the bound of one "
        "pass's cost (docs/storage.md, Data lifecycle)",
    )
    log_level: str = Field(default="INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$")
    # A dp-agent (Dream) pipeline file carries no agent settings of its own: these apply.
    dream_window: int = Field(
        default=40,
        ge=2,
        le=1000,
        description="utterances a turn reads "
        "for a dp-agent pipeline's formatters (true counts are kept)",
    )
    dream_turn_timeout: float | None = Field(
        default=None,
        ge=0,
        le=600,
        description="seconds before a dp-agent pipeline's timeout service answers (dp-agent's "
        "response_time_limit); unset or 0: no deadline for the whole turn, each service "
        "bounded by its own timeout, as dp-agent runs Dream",
    )

    max_user_id_length: int = Field(
        default=256,
        ge=1,
        le=4096,
        description="longest accepted user id, in characters (dp-agent sets none); any "
        "printable text up to it is a user id",
    )
    command_reply: Literal["chorus", "dp-agent"] | None = Field(
        default=None,
        description="what POST / answers to /start and /close: Chorus's reply naming the "
        "closed dialog, or dp-agent's empty object {} (docs/dream.md); unset: dp-agent's "
        "for a dp-agent pipeline file, else Chorus's",
    )
    dialog_view: Literal["chorus", "dp-agent"] | None = Field(
        default=None,
        description="the shape GET /api/dialogs/{id} and /api/user/{id} answer in when the "
        "request does not say (?view=): Chorus's typed state, or dp-agent's as its clients "
        "and Dream's tools read it (docs/dream.md); unset: dp-agent's for a dp-agent "
        "pipeline file, else Chorus's",
    )

    log_format: Literal["text", "json"] = Field(
        default="text",
        description="json: one object per line, with the turn's dialog_id, "
        "utt_id and trace_id (docs/observability.md)",
    )
    trace_user_ids: Literal["hash", "omit"] = Field(
        default="hash",
        description="what a turn's span says of the user: a hash of the id, "
        "or nothing (tracing itself is set with the standard OTEL_* variables)",
    )
    trace_id_key: SecretStr | None = Field(
        default=None,
        description="the secret key of the user id hash in traces (HMAC-SHA256), the same "
        "on every replica so a user's hash is one across them; unset, each process makes a "
        "random one (docs/observability.md)",
    )
    ready_services: list[str] = Field(
        default_factory=list,
        description="services GET /ready also needs reachable, e.g. "
        '["tokens"], besides those another service requires (required_previous_services)',
    )

    def dream_deadline(self) -> float | None:
        """A dp-agent pipeline's whole-turn deadline in seconds; None: none (0 says so too)."""
        return self.dream_turn_timeout or None

    def storage_limits(self) -> StorageLimits:
        """The bounds every stored value from a service is held to."""
        return StorageLimits(
            max_depth=self.max_json_depth,
            max_items=self.max_json_items,
            max_bytes=self.max_value_bytes,
            max_document_bytes=self.max_document_bytes,
            max_attribute_keys=self.max_attribute_keys,
        )

    def retention(self) -> Retention:
        """The data lifecycle's rules (each None: that rule is off)."""

        def span(seconds: float | None) -> timedelta | None:
            return None if seconds is None else timedelta(seconds=seconds)

        return Retention(
            closed_dialogs=span(self.retain_closed_dialogs),
            idle_dialogs=span(self.close_idle_dialogs),
            compact_turns=span(self.compact_turns_after),
        )

    def client_limits(self) -> StorageLimits:
        """The same bounds for what a client sends, whose size CHORUS_MAX_BODY_BYTES
        already caps (an observation's image may be larger than one service's output)."""
        return replace(
            self.storage_limits(), max_bytes=max(self.max_value_bytes, self.max_body_bytes)
        )

    @field_validator("db_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(("sqlite://", "mongodb://", "mongodb+srv://")):
            raise ValueError("use sqlite:///data/chorus.db or mongodb://host:27017/chorus")
        return value

    def trace_id_key_bytes(self) -> bytes | None:
        """``CHORUS_TRACE_ID_KEY`` as the HMAC's key, or None when it is unset."""
        key = self.trace_id_key
        return None if key is None else key.get_secret_value().encode()

    @field_validator("max_websockets")
    @classmethod
    def _room_for_http(cls, value: int | None, info: ValidationInfo) -> int | None:
        connections = info.data.get("max_connections")
        if value is not None and connections is not None and value >= connections:
            raise ValueError(
                f"{value} would leave none of the {connections} connections "
                "(CHORUS_MAX_CONNECTIONS) to plain HTTP clients; set it lower"
            )
        return value

    @field_validator("api_key", "trace_id_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters long (e.g. `openssl rand -hex 16`)")
        return value

    @model_validator(mode="after")
    def _old_names(self) -> Settings:
        """Settings renamed to the glossary's words still work, with a warning."""
        if self.turn_lease is not None:
            warnings.warn(
                "CHORUS_TURN_LEASE is deprecated: set CHORUS_LINE_LEASE instead (same meaning)",
                DeprecationWarning,
                stacklevel=2,
            )
            if "line_lease" not in self.model_fields_set:
                self.line_lease = self.turn_lease
        return self

    @model_validator(mode="after")
    def _chat_protection_needs_a_key(self) -> Settings:
        if self.protect_chat and self.api_key is None:
            raise ValueError("protect_chat is true but api_key is not set")
        return self


def load_settings() -> Settings:
    """Read the settings, or fail with the bad variable's name in the message."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{ENV_PREFIX}{str(e['loc'][0]).upper() if e['loc'] else 'PROTECT_CHAT'}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise SettingsError(f"bad settings: {problems}") from None


TELEGRAM_PREFIX = "CHORUS_TELEGRAM_"


class TelegramSettings(BaseSettings):
    """What ``chorus telegram`` reads: the bot's token, where the Bot API and the agent are."""

    model_config = SettingsConfigDict(
        env_prefix=TELEGRAM_PREFIX, env_file=".env", extra="ignore", populate_by_name=True
    )

    token: SecretStr = Field(description="the bot's token, from @BotFather")
    api_url: str = Field(
        default="https://api.telegram.org",
        description="the Bot API's base URL (a local Bot API server, or a test's)",
    )
    agent_url: str = Field(default="http://127.0.0.1:4242", description="the agent to talk to")
    api_key: SecretStr | None = Field(
        default=None, description="the agent's X-API-Key, when it protects its chat"
    )
    poll_timeout: int = Field(
        default=25, ge=0, le=50, description="seconds a getUpdates long poll waits for news"
    )
    retries: int = Field(
        default=5, ge=0, le=100, description="tries again after a network error or a 5xx"
    )
    batch: int = Field(
        default=100,
        ge=1,
        le=100,
        description="updates one getUpdates asks for (its limit; the Bot API's most is 100)",
    )
    concurrency: int = Field(
        default=8, ge=1, le=100, description="users of a batch answered at once"
    )
    file_server_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(f"{TELEGRAM_PREFIX}FILE_SERVER_URL", "FILE_SERVER_URL"),
        description="the file server photos, voice and video are uploaded to (as Dream's "
        "FILE_SERVER_URL, also read); unset: media messages are sent without them",
    )
    max_file_bytes: int = Field(
        default=20_000_000,
        ge=1024,
        le=2_000_000_000,
        description="largest media file fetched from Telegram (the Bot API's own is 20 MB)",
    )

    @field_validator("api_url", "agent_url", "file_server_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


def _telegram_variable(field: str) -> str:
    """The variable a setting is read from (the file server's has Dream's name too)."""
    if field.upper().endswith("FILE_SERVER_URL"):
        return f"{TELEGRAM_PREFIX}FILE_SERVER_URL (or FILE_SERVER_URL)"
    return f"{TELEGRAM_PREFIX}{field.upper()}"


def load_telegram_settings() -> TelegramSettings:
    """Read ``chorus telegram``'s settings, or fail naming the bad variable."""
    try:
        return TelegramSettings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{_telegram_variable(str(e['loc'][0]))}: "
            + ("required: the bot's token from @BotFather" if e["type"] == "missing" else "")
            + (e["msg"].removeprefix("Value error, ") if e["type"] != "missing" else "")
            for e in exc.errors()
        )
        raise SettingsError(f"bad settings: {problems}") from None
