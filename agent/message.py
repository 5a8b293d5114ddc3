"""ParlAI's Message: a dict that refuses to overwrite a key silently.

The pipeline keeps annotations in Messages, so an annotator's output, once written, cannot
be replaced by a second write in the same turn. Every ParlAI act or observation Chorus
sends is shaped by :meth:`Message.json_safe_payload`, as ParlAI shapes what it sends to a
client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agent.sdk.errors import ChorusError

#: Fields that never leave the agent: ParlAI's vectorised tensors, batch padding, and
#: anything whose name starts with an underscore.
INTERNAL_FIELDS = frozenset(
    {
        "text_vec",
        "labels_vec",
        "eval_labels_vec",
        "label_candidates_vecs",
        "full_text_vec",
        "batch_padding",
    }
)


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


class MessageOverwriteError(ChorusError, RuntimeError):
    """A key of a Message was set a second time."""

    def __init__(self, key: str) -> None:
        super().__init__(f"Message already contains key `{key}`: a key is written once")
        self.key = key


class Message(dict[str, Any]):
    """A dict whose keys are write-once unless forced."""

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self:
            raise MessageOverwriteError(key)
        super().__setitem__(key, value)

    def update(  # type: ignore[override]
        self, other: Mapping[str, Any] | Iterable[tuple[str, Any]] = (), /, **kwargs: Any
    ) -> None:
        """Like ``dict.update``, but through ``__setitem__``: no silent overwrite either."""
        items = list(other.items() if isinstance(other, Mapping) else other)
        for key, value in [*items, *kwargs.items()]:
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> Message:
        """A shallow copy that is still a Message."""
        return type(self)(self)

    def json_safe_payload(self) -> dict[str, Any]:
        """A plain dict for a client: internal fields (:data:`INTERNAL_FIELDS`, names
        starting with ``_``) and values that are not JSON-safe (bytes, sets, objects,
        NaN or infinite floats) are left out."""
        return {
            key: value
            for key, value in self.items()
            if key not in INTERNAL_FIELDS and not key.startswith("_") and _json_safe(value)
        }
