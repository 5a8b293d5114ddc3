"""Log lines for people (the default) or for a log store: one JSON object per line.

JSON lines carry the turn's ``dialog_id``, ``utt_id`` and ``trace_id`` when logged inside a
turn, so "every line of this slow turn" is one query, and the trace id leads to the trace.
A formatter of our own rather than a JSON-logging package: the turn's ids come from
:mod:`agent.telemetry.turns` either way, and what is left is ``json.dumps`` of a dict.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace

from agent.telemetry.turns import current_turn

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: uvicorn's own loggers have handlers of their own; JSON mode reformats them too.
_SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


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


def configure_logging(level: str, log_format: LogFormat) -> None:
    """The root logger at ``level``, writing to stderr in ``log_format``; in JSON mode the
    server's own lines (uvicorn's) become JSON too, so every line of the process parses."""
    if log_format == "text":
        logging.basicConfig(level=level, format=TEXT_FORMAT)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler])
    for name in _SERVER_LOGGERS:
        for server_handler in logging.getLogger(name).handlers:
            server_handler.setFormatter(JsonFormatter())
