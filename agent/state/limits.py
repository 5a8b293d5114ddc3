"""What may be stored: the bounds every value from a client or a service is held to.

A dialog is only as readable as its worst stored value. JSON that is nested a few hundred
levels deep is written by SQLite and then cannot be parsed back (every later turn of that
user fails); a document over 16 MB is refused by MongoDB; NaN and Infinity are not JSON and
make a MongoDB wire server drop the connection; a lone UTF-16 surrogate cannot be encoded
as UTF-8 at all; integers beyond 64 bits do not fit BSON. So every value is measured
*before* anything is written, identically for both stores:

* **depth**: nesting of objects and lists (``{}`` is 1 deep);
* **items**: object members plus list items, over the whole value;
* **bytes**: the value's size as JSON, estimated in the same walk;
* **numbers**: finite floats and integers within 64 bits;
* **text**: strings and keys that encode to UTF-8 (no lone surrogates).

A client that sends such a value gets a 422 naming where it is; a service's output is
refused and the refusal recorded as that service's error, and the turn goes on. The walk
stops at the first problem, so a hostile value costs at most the bounds to look at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agent.sdk.errors import ChorusError

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Bytes a number, ``true``, ``false`` or ``null`` is counted as (its JSON text at most).
_SCALAR_BYTES = 24


class UnstorableValue(ChorusError, ValueError):
    """A value breaks one of the storage bounds; the message says where and which."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class _Problem(ChorusError):
    """Raised deep in the walk; each level on the way up adds its key to the path."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.path: list[str] = []


def _check_text(text: str) -> int:
    """The UTF-8 size of a string; a lone surrogate cannot be encoded, so it is refused."""
    if text.isascii():
        return len(text) + 2
    try:
        return len(text.encode("utf-8")) + 2
    except UnicodeEncodeError:
        raise _Problem(
            "a string holds a lone UTF-16 surrogate, which is not valid Unicode text"
        ) from None


def _short(key: object) -> str:
    """A key as shown in an error: a hostile key may be long, the message stays short."""
    shown = repr(key)
    return shown if len(shown) <= 42 else shown[:39] + "..."


@dataclass(frozen=True, slots=True)
class StorageLimits:
    """The bounds (see the module docstring); the defaults are the settings' defaults."""

    max_depth: int = 32
    max_items: int = 10_000
    max_bytes: int = 262_144
    max_document_bytes: int = 4_000_000
    max_attribute_keys: int = 1_000

    def measure(
        self, value: Any, where: str = "value", setting: str = "CHORUS_MAX_VALUE_BYTES"
    ) -> int:
        """The value's estimated size in bytes as JSON, or :class:`UnstorableValue`;
        ``setting`` is the one a refusal names for ``max_bytes``."""
        walk = _Walk(self)
        try:
            size = walk.visit(value, 0)
        except _Problem as problem:
            path = "".join(reversed(problem.path))
            raise UnstorableValue(f"{where}{path}", problem.problem) from None
        if size > self.max_bytes:
            raise UnstorableValue(
                where,
                f"is about {size} bytes as JSON; the limit is {self.max_bytes} ({setting})",
            )
        return size


class _Walk:
    """One measurement: counts items across the whole value."""

    __slots__ = ("items", "limits")

    def __init__(self, limits: StorageLimits) -> None:
        self.limits = limits
        self.items = 0

    def visit(self, value: Any, depth: int) -> int:
        if isinstance(value, str):
            return _check_text(value)
        if value is None or isinstance(value, bool):
            return _SCALAR_BYTES
        if isinstance(value, int):
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise _Problem("an integer is outside the 64-bit range")
            return _SCALAR_BYTES
        if isinstance(value, float):
            if not math.isfinite(value):
                raise _Problem(f"{value} is not a JSON number (NaN and Infinity are refused)")
            return _SCALAR_BYTES
        if isinstance(value, dict | list | tuple):
            return self._container(value, depth + 1)
        raise _Problem(f"a {type(value).__name__} is not JSON")

    def _container(self, value: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int) -> int:
        limits = self.limits
        if depth > limits.max_depth:
            raise _Problem(
                f"nested more than {limits.max_depth} levels deep (CHORUS_MAX_JSON_DEPTH)"
            )
        self.items += len(value)
        if self.items > limits.max_items:
            raise _Problem(
                f"more than {limits.max_items} object members and list items "
                "(CHORUS_MAX_JSON_ITEMS)"
            )
        size = 2
        if isinstance(value, dict):
            for key, item in value.items():
                try:
                    if not isinstance(key, str):
                        raise _Problem(f"a {type(key).__name__} key is not JSON")
                    size += _check_text(key) + 2 + self.visit(item, depth)
                except _Problem as problem:
                    problem.path.append(f"[{_short(key)}]")
                    raise
        else:
            for index, item in enumerate(value):
                try:
                    size += 1 + self.visit(item, depth)
                except _Problem as problem:
                    problem.path.append(f"[{index}]")
                    raise
        return size
