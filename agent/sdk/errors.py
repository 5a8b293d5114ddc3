"""Every error Chorus raises on purpose derives from :class:`ChorusError`.

Each error is defined next to the layer that raises it (so a reader meets it where it
happens); this docstring is the map of all of them. ``except ChorusError`` catches every
fault Chorus knows about and nothing else: a bug is never mistaken for a known failure.
Errors that callers test for with ``except ValueError`` (a bad setting, an unstorable
value) or ``except RuntimeError`` keep that base too.

    ChorusError
     ├── ConfigError [ValueError]     the agent cannot start as configured
     │    ├── SettingsError            agent/settings.py        a CHORUS_* variable
     │    ├── PipelineConfigError      agent/pipeline/config.py the pipeline file
     │    ├── ServiceNotLoaded         agent/connectors/in_process.py  a module named to
     │    │                            run a service in the agent gives none
     │    └── TelemetryConfigError     agent/sdk/tracing_env.py an OTEL_* variable
     ├── HandlerSignatureError [TypeError]  agent/sdk/contracts.py  a service's handler cannot
     │                                 be called as its role calls it: refused when decorated
     ├── ContractError [ValueError]   agent/sdk/contracts.py   a handler answered outside its
     │                                 role's contract: the service answers 500 with the why
     ├── ServiceError                 agent/connectors/errors.py: a service's output is lost
     │    ├── ServiceTimeout           no answer in time
     │    ├── ServiceUnavailable       could not connect, or the connection broke
     │    ├── BadServiceStatus         answered a non-2xx status
     │    ├── BadServiceResponse       answered 2xx, but not the right shape
     │    └── RefusedOutput            agent/turn/limits.py: the output broke a rule of
     │                                 the state (another's slot, the storage bounds)
     ├── StoreUnavailable             agent/store/base.py      the database is away: 503
     │    └── SchemaRefused           agent/store/schema.py    its schema is not this build's
     ├── StoreWriteRefused            agent/store/base.py      the database refused a document
     ├── RatingsFull                  agent/store/base.py      a dialog or an answer holds the
     │                                                         most ratings kept: 409
     ├── PlaceLost                    agent/store/base.py      a turn's end refused: its place in
     │                                                         the queue was passed over
     ├── QueueTimeout                 agent/queues.py          the user's queue did not move: 503
     ├── TurnRunning                  agent/queues.py          a message of the user is being
     │                                                         answered (double texting
     │                                                         ``reject``): 409
     ├── TurnInterrupted              agent/queues.py          a later message cancelled the
     │                                                         turn (``interrupt``): 409
     ├── TurnOvertaken                agent/queues.py          the turn lost its place while it
     │                                                         ran (PlaceLost): 503, retry
     ├── HandoffError                 agent/handoff/errors.py  a handoff cannot change as asked
     │    ├── HandoffOff               no handoff section, or no operator key: 409
     │    ├── NotHandedOff             the dialog is not with a person (an operator sees
     │    │                            nothing of it): 404
     │    └── HandoffConflict          held by another operator, handed off already, not
     │                                 claimed by this operator: 409
     ├── KeyInFlight                  agent/idempotency.py     the key's message is running: 409
     ├── KeyReused                    agent/idempotency.py     the key named another message: 422
     ├── KeySuperseded                agent/idempotency.py     the key's message was passed by a
     │                                                         later one, unanswered: 409
     ├── KeyForgotten                 agent/idempotency.py     the key's answered dialog is no
     │                                                         longer stored: 409
     ├── UnstorableValue [ValueError] agent/state/storage_limits.py  a value breaks the
     │                                                         storage bounds
     ├── KeyWrittenTwice [RuntimeError]  agent/state/write_once.py  a write-once key written
     │    │                            twice (a turn's annotation slot)
     │    └── MessageOverwriteError    agent/message.py         the same, in ParlAI's Message
     ├── BodyTooLarge [HTTPException] agent/api/request_limits.py  a request body too big: 413
     ├── DatasetError [ValueError]    agent/parlai/formats.py  a ParlAI dataset file is wrong
     ├── BackupError                  agent/backup/files.py    a backup file cannot be read
     │    └── RecordRefused            agent/backup/checks.py  a record breaks a bound
     │                                 or an id rule: nothing of the file is imported
     ├── ReplayError [RuntimeError]   agent/parlai/replay.py   the agent answered a replay badly
     ├── ChatError                    agent/cli/chat.py        ``chorus chat`` cannot go on
     ├── UnknownSelection [LookupError]  agent/cli/replay/turns.py  ``chorus replay`` was
     │                                 given a user or dialog the store does not hold
     ├── LabelError [ValueError]      agent/cli/replay/labels.py  a ``chorus replay --labels``
     │                                 file cannot be read, or names a turn not stored
     ├── TelegramError                agent/cli/telegram.py    the Bot API refused for good
     ├── MediaError                   agent/cli/telegram_media.py  a photo, voice or video
     │                                 could not be fetched or stored: only that attribute is lost
     ├── OverrideError [ValueError]   agent/cli/dream.py       ``chorus dream compose-block``
     │                                 cannot read the distribution's override file
     ├── ComposeTextError             agent/cli/compose_text.py  ``chorus new`` cannot
     │                                 edit docker-compose.yml's layout
     └── ScaffoldError                agent/cli/scaffold.py    ``chorus new`` cannot write

The base lives in the service SDK, the lowest layer, because a service's container carries
only ``agent/sdk`` and the SDK's own errors belong to the tree too.
"""

from __future__ import annotations

__all__ = ["ChorusError", "ConfigError"]


class ChorusError(Exception):
    """Base of every error Chorus raises on purpose."""


class ConfigError(ChorusError, ValueError):
    """Something configured cannot run; the message names the setting or entry to fix.
    Raised at start-up, so a bad configuration stops the agent before it listens."""
