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

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

from agent.sdk.errors import ChorusError

#: The bounds' values: constants, not settings (what each guards against is above, and in
#: docs/trust-boundary.md). A test or an embedding program passes others to StorageLimits.
MAX_JSON_DEPTH = 32
MAX_JSON_ITEMS = 10_000
MAX_VALUE_BYTES = 262_144
MAX_DOCUMENT_BYTES = 4_000_000
MAX_ATTRIBUTE_KEYS = 1_000
MAX_RATING_BYTES = 4096
MAX_RATINGS = 100
MAX_IMAGE_BYTES = 1_000_000
MAX_USER_ID_LENGTH = 256

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
    """The bounds (see the module docstring); the defaults are what the agent runs with."""

    #: deepest nesting of objects and lists (MongoDB nests at most 100 levels)
    max_depth: int = MAX_JSON_DEPTH
    #: object members plus list items in one value: the work one value may cost
    max_items: int = MAX_JSON_ITEMS
    #: one service's output per turn, as JSON
    max_bytes: int = MAX_VALUE_BYTES
    #: one stored utterance, profile or dialog head, as JSON (MongoDB refuses 16 MB)
    max_document_bytes: int = MAX_DOCUMENT_BYTES
    #: keys a user's or a bot's attributes may hold (read on every turn)
    max_attribute_keys: int = MAX_ATTRIBUTE_KEYS
    #: one rating as JSON (``POST /rating/*``)
    max_rating_bytes: int = MAX_RATING_BYTES
    #: ratings kept per dialog and per bot answer; past it a rating is refused, never dropped
    max_ratings: int = MAX_RATINGS
    #: one base64 image in an observation (``POST /api/v1/observe``), decoded
    max_image_bytes: int = MAX_IMAGE_BYTES
    #: characters of a user id (any printable text up to it is one; dp-agent sets no
    #: limit): it is stored, and logged, with every turn of its user
    max_user_id_length: int = MAX_USER_ID_LENGTH

    def for_client(self, max_body_bytes: int) -> StorageLimits:
        """The same bounds for what a client sends, whose size the request body's cap
        already bounds (an observation's image may be larger than one service's output).
        Made once per bounds and cap: every chat request asks."""
        return _for_client(self, max_body_bytes)

    def measure(self, value: Any, where: str = "value", setting: str = "MAX_VALUE_BYTES") -> int:
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
    """One measurement: counts items across the whole value.

    A container's ASCII strings, ``None``, booleans and finite floats of exactly those
    types are measured in its own loop, without a call of :meth:`visit` each: every
    output of every service call is walked, and those calls were most of the walk's
    function calls (docs/performance.md, "Half the CPU"). Anything else (an ``int``, a
    subclass, a string that is not ASCII, a container) goes through :meth:`visit`,
    which decides as before."""

    __slots__ = ("items", "limits")

    def __init__(self, limits: StorageLimits) -> None:
        self.limits = limits
        self.items = 0

    def visit(self, value: Any, depth: int) -> int:
        kind = type(value)
        if kind is dict or kind is list:  # what a service's output is, and holds
            return self._container(value, depth + 1)
        if kind is int:
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise _Problem("an integer is outside the 64-bit range")
            return _SCALAR_BYTES
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
            raise _Problem(f"nested more than {limits.max_depth} levels deep (MAX_JSON_DEPTH)")
        self.items += len(value)
        if self.items > limits.max_items:
            raise _Problem(
                f"more than {limits.max_items} object members and list items (MAX_JSON_ITEMS)"
            )
        size = 2
        if isinstance(value, dict):
            for key, item in value.items():
                try:
                    if type(key) is str and key.isascii():
                        size += len(key) + 4
                    elif isinstance(key, str):
                        size += _check_text(key) + 2
                    else:
                        raise _Problem(f"a {type(key).__name__} key is not JSON")
                    kind = type(item)
                    if kind is str and item.isascii():
                        size += len(item) + 2
                    elif item is None or kind is bool or (kind is float and math.isfinite(item)):
                        size += _SCALAR_BYTES
                    else:
                        size += self.visit(item, depth)
                except _Problem as problem:
                    problem.path.append(f"[{_short(key)}]")
                    raise
        else:
            for index, item in enumerate(value):
                try:
                    kind = type(item)
                    if kind is str and item.isascii():
                        size += len(item) + 3
                    elif item is None or kind is bool or (kind is float and math.isfinite(item)):
                        size += 1 + _SCALAR_BYTES
                    else:
                        size += 1 + self.visit(item, depth)
                except _Problem as problem:
                    problem.path.append(f"[{index}]")
                    raise
        return size


@functools.lru_cache(maxsize=64)
def _for_client(limits: StorageLimits, max_body_bytes: int) -> StorageLimits:
    return replace(limits, max_bytes=max(limits.max_bytes, max_body_bytes))
