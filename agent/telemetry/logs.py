"""Log lines for people (the default) or for a log store: one JSON object per line.

JSON lines carry the turn's ``dialog_id``, ``utt_id`` and ``trace_id`` when logged inside a
turn, so "every line of this slow turn" is one query, and the trace id leads to the trace.
A formatter of our own rather than a JSON-logging package: the turn's ids come from
:mod:`agent.telemetry.turns` either way, and what is left is ``json.dumps`` of a dict.

Text a service or a client chose (an error body, an exception's message, a skill name a
selector made up, a database error quoting a document) goes into a line through
:func:`printable`: a newline in it would otherwise start a line of its own, which a reader
or a log shipper takes for a line the agent wrote (``FORGED ... ERROR chorus ...``). The
text formatter also indents every line after a record's first (a traceback's), so nothing
a record carries can start a line as a new record does.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace

from agent.telemetry.turns import current_turn

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Characters of outside text logged at most, per value: a 2 MB error body is not a line.
LOGGED_TEXT_LIMIT = 500
#: Line breaks, other control characters, and the invisible ones that reorder or hide text
#: on a terminal (bidirectional overrides, zero-width characters, the byte order mark).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
#: What starts a new line for a reader of a text log (``str.splitlines``' breaks).
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTINUED = "\n    "


def printable(value: object, limit: int = LOGGED_TEXT_LIMIT) -> str:
    """``value`` as text that stays on its log line: control and invisible characters
    written as escapes (``\\n``, ``\\x1b``, ``\\u2028``), and at most ``limit``
    characters of it, the cut said."""
    text = str(value)
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return _UNPRINTABLE.sub(lambda found: repr(found.group())[1:-1], text)


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT`, each line after a record's first indented: a traceback stays
    readable, and no text in a record can start a line that looks like another record."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return _LINE_BREAK.sub(_CONTINUED, super().format(record))


#: uvicorn's own loggers have handlers of their own; JSON mode reformats them too.
_SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")

#: The API key in a URL's query (``?api_key=``: a browser cannot set headers on a
#: WebSocket), its name as sent or percent-encoded, up to the next parameter.
_KEY_IN_QUERY = re.compile(r"([?&]api(?:_|%5f)key=)[^&\s\"]*", re.IGNORECASE)
REDACTED = "[redacted]"


def redact_query(text: str) -> str:
    """``text`` with the value of any ``api_key`` query parameter replaced."""
    return _KEY_IN_QUERY.sub(lambda found: found.group(1) + REDACTED, text)


class RedactKeys(logging.Filter):
    """uvicorn logs each request's and each WebSocket's path with its query (the access
    line, ``"WebSocket /chat/ws?api_key=..." [accepted]``): the key is taken out of the
    record's arguments before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_query(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        if isinstance(record.msg, str):
            record.msg = redact_query(record.msg)
        return True


def redact_server_logs() -> None:
    """Add :class:`RedactKeys` to uvicorn's loggers, once."""
    for name in _SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactKeys) for f in logger.filters):
            logger.addFilter(RedactKeys())


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...}`` on one line, plus the turn's ids and,
    for an exception, its traceback as ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        turn = current_turn()
        if turn is not None:
            line["dialog_id"] = turn.dialog_id
            line["utt_id"] = turn.utt_id
            line["trace_id"] = turn.trace_id
            span = trace.get_current_span().get_span_context()
            if span.is_valid:
                line["span_id"] = trace.format_span_id(span.span_id)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


#: HTTP clients that log each request at INFO: a service in the agent's process calling out
#: (the LLM skill, a retrieval API) would add a line per call, its full URL included (some
#: vendors take the key in the query), to what the agent's own lines and traces say.
_CLIENT_LOGGERS = ("httpx", "httpcore")


def configure_logging(level: str, log_format: LogFormat) -> None:
    """The root logger at ``level``, writing to stderr in ``log_format``; in JSON mode the
    server's own lines (uvicorn's) become JSON too, so every line of the process parses.
    The server's lines never carry the API key (:class:`RedactKeys`), and the HTTP clients'
    request lines show from DEBUG only (:data:`_CLIENT_LOGGERS`).

    The handler holds ``level`` too, so a module that turns the root logger (or its own) to
    DEBUG later, as Dream's connectors do, still adds no line below it."""
    redact_server_logs()
    quiet = logging.DEBUG if logging.getLevelName(level) == logging.DEBUG else logging.WARNING
    for name in _CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    handler = logging.StreamHandler()
    handler.setLevel(level)
    if log_format == "text":
        handler.setFormatter(TextFormatter())
        logging.basicConfig(level=level, handlers=[handler])
        return
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler])
    for name in _SERVER_LOGGERS:
        for server_handler in logging.getLogger(name).handlers:
            server_handler.setFormatter(JsonFormatter())


@contextmanager
def root_logger_kept() -> Iterator[None]:
    """Undo what the code run inside does to the root logger: its level, and handlers added
    or removed. Loading a pipeline imports its modules, and Dream's call
    ``logging.basicConfig(level=DEBUG)`` when imported: the agent's log would take every
    library's DEBUG lines (the MongoDB driver's, megabytes an hour) in their format."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.setLevel(level)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
