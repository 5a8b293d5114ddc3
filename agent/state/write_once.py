"""A dict whose keys are written once: a turn's annotations and ParlAI's Message.

A service's output is written under its own name; a second write under that name in the
same turn (a misconfigured pipeline, two services sharing a name, a dp-agent formatter
writing where another already did) must be refused, not silently replace the first one.
The executor keeps each utterance's and hypothesis's annotations in a :class:`WriteOnce`;
ParlAI's :class:`agent.message.Message` has the same rule and derives from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Self

from agent.sdk.errors import ChorusError


class KeyWrittenTwice(ChorusError, RuntimeError):
    """A key of a :class:`WriteOnce` was set a second time."""

    def __init__(self, key: str, message: str | None = None) -> None:
        super().__init__(message or f"`{key}` is already written: a key is written once")
        self.key = key


class WriteOnce(dict[str, Any]):
    """A dict whose keys cannot be set again: every way in (``[]``, ``update``,
    ``setdefault``) refuses to overwrite with :class:`KeyWrittenTwice`."""

    def _written_twice(self, key: str) -> KeyWrittenTwice:
        return KeyWrittenTwice(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self:
            raise self._written_twice(key)
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

    def copy(self) -> Self:
        """A shallow copy of the same type, as write-once as the original."""
        return type(self)(self)
