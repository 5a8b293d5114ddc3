"""What ``chorus telegram`` reads from ``CHORUS_TELEGRAM_*`` variables (or a ``.env`` file):
the bot's token and where the Bot API, the agent and the file server are.

How the bot polls and retries is :class:`Polling`, the settings' nested type; its values
are constants (:data:`REMOVED` lists the variables they were), not variables.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agent.settings import VARIABLES, SettingsError, WithoutNested, refuse_removed

TELEGRAM_PREFIX = "CHORUS_TELEGRAM_"

#: Tries again after a network error or a 5xx, of the Bot API or of the agent.
RETRIES = 5
#: Updates one ``getUpdates`` asks for (its ``limit``; the Bot API's most is 100).
BATCH = 100
#: Users of a batch answered at once (in order within a user).
CONCURRENCY = 8
#: Largest media file fetched from Telegram (the Bot API's own limit is 20 MB).
MAX_FILE_BYTES = 20_000_000
#: Seconds a ``getUpdates`` long poll waits for news (the Bot API's most is 50).
POLL_TIMEOUT = 25
#: Seconds one media file may take, fetched from Telegram and stored on the file server
#: together, whatever either's pace: a server sending a byte a minute never trips a
#: per-read timeout, and would hold its user's messages for good.
MEDIA_DEADLINE = 60.0
#: Longest wait honoured of a 429's ``retry_after``: a longer one is waited this long, then
#: the call is tried again (a bot told to wait a day must come back by itself).
MAX_RETRY_AFTER = 600.0

#: Variables the bot no longer reads (without the prefix) -> what to do instead.
REMOVED = {
    "RETRIES": f"a constant now (RETRIES in {__name__}, {RETRIES}): unset it",
    "BATCH": f"a constant now (BATCH in {__name__}, {BATCH}): unset it",
    "CONCURRENCY": f"a constant now (CONCURRENCY in {__name__}, {CONCURRENCY}): unset it",
    "MAX_FILE_BYTES": f"a constant now (MAX_FILE_BYTES in {__name__}, {MAX_FILE_BYTES}): unset it",
    "POLL_TIMEOUT": f"a constant now (POLL_TIMEOUT in {__name__}, {POLL_TIMEOUT}): unset it",
}


#: The settings' nested fields, not read from the environment.
_NESTED = frozenset({"polling"})


@dataclass(frozen=True, slots=True)
class Polling:
    """How the bot polls Telegram and calls the agent (a test passes smaller values)."""

    retries: int = RETRIES
    batch: int = BATCH
    concurrency: int = CONCURRENCY
    max_file_bytes: int = MAX_FILE_BYTES
    poll_timeout: int = POLL_TIMEOUT
    media_deadline: float = MEDIA_DEADLINE
    max_retry_after: float = MAX_RETRY_AFTER


class TelegramSettings(BaseSettings):
    """What ``chorus telegram`` reads: the bot's token, where the Bot API and the agent are."""

    model_config = SettingsConfigDict(
        env_prefix=TELEGRAM_PREFIX, env_file=".env", extra="ignore", populate_by_name=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """``CHORUS_TELEGRAM_POLLING`` holding JSON is not a setting: only code passes one."""
        return (
            init_settings,
            WithoutNested(settings_cls, env_settings, _NESTED),
            WithoutNested(settings_cls, dotenv_settings, _NESTED),
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
    file_server_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(f"{TELEGRAM_PREFIX}FILE_SERVER_URL", "FILE_SERVER_URL"),
        description="the file server photos, voice and video are uploaded to (as Dream's "
        "FILE_SERVER_URL, also read); unset: media messages are sent without them",
    )
    #: constants, never read from the environment (see :data:`REMOVED`)
    polling: Polling = Field(default_factory=Polling)

    @field_validator("api_url", "agent_url", "file_server_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


#: The variables the bot reads (the file server's is also read as Dream's ``FILE_SERVER_URL``).
TELEGRAM_VARIABLES = sorted(
    f"{TELEGRAM_PREFIX}{name.upper()}"
    for name in TelegramSettings.model_fields
    if name not in _NESTED
)

#: Every ``CHORUS_*`` variable an operator can set, the agent's (:data:`VARIABLES`) and the
#: bot's: all there is to configure besides the pipeline file (docs/configuration.md).
ALL_VARIABLES = sorted([*VARIABLES, *TELEGRAM_VARIABLES])


def _telegram_variable(field: str) -> str:
    """The variable a setting is read from (the file server's has Dream's name too)."""
    if field.upper().endswith("FILE_SERVER_URL"):
        return f"{TELEGRAM_PREFIX}FILE_SERVER_URL (or FILE_SERVER_URL)"
    return f"{TELEGRAM_PREFIX}{field.upper()}"


def load_telegram_settings() -> TelegramSettings:
    """Read ``chorus telegram``'s settings, or fail naming the bad variable."""
    refuse_removed(TelegramSettings, TELEGRAM_PREFIX, REMOVED)
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
