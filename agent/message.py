"""ParlAI's Message: a dict that refuses to overwrite a key silently.

Every ParlAI act or observation Chorus sends is shaped by
:meth:`Message.json_safe_payload`, as ParlAI shapes what it sends to a client. Its
write-once rule is :class:`agent.state.write_once.WriteOnce`'s, which the pipeline uses for
a turn's annotations.
"""

from __future__ import annotations

import json
from typing import Any

from agent.state.write_once import KeyWrittenTwice, WriteOnce

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


class MessageOverwriteError(KeyWrittenTwice):
    """A key of a Message was set a second time."""

    def __init__(self, key: str) -> None:
        super().__init__(key, f"Message already contains key `{key}`: a key is written once")


class Message(WriteOnce):
    """ParlAI's message: a dict whose keys are write-once (:class:`WriteOnce`), shaped for
    a client by :meth:`json_safe_payload`."""

    def _written_twice(self, key: str) -> KeyWrittenTwice:
        return MessageOverwriteError(key)

    def json_safe_payload(self) -> dict[str, Any]:
        """A plain dict for a client: internal fields (:data:`INTERNAL_FIELDS`, names
        starting with ``_``) and values that are not JSON-safe (bytes, sets, objects,
        NaN or infinite floats) are left out."""
        return {
            key: value
            for key, value in self.items()
            if key not in INTERNAL_FIELDS and not key.startswith("_") and _json_safe(value)
        }
