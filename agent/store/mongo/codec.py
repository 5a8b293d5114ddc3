"""The MongoDB key codec: free-form JSON stored losslessly (see the package)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agent.store.mongo.errors import Doc


def literal(value: str) -> str:
    """A value about to go into a query filter must be a string: a dict such as
    ``{"$ne": None}`` would be read as an operator. Types say so already; this makes it
    true at run time too, whoever the caller is."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string id, got {type(value).__name__}")
    return value


# -- key escaping ---------------------------------------------------------------------


_ESCAPED_ANYWHERE = re.compile(r"[%.\x00]")
_ESCAPE_SEQUENCE = re.compile(r"%u([0-9A-F]{4})|%([0-9A-F]{2})")


def _percent(char: str) -> str:
    code = ord(char)
    return f"%{code:02X}" if code < 256 else f"%u{code:04X}"


def escape_key(key: str) -> str:
    """``%``, ``.`` and NUL anywhere, a leading ``$``, and whitespace at either end (which
    FerretDB 1.x refuses in an update path) become ``%XX`` / ``%uXXXX``."""
    if key.isidentifier():  # most keys: nothing to escape
        return key
    key = _ESCAPED_ANYWHERE.sub(lambda match: _percent(match.group()), key)
    if key.startswith("$"):
        key = "%24" + key[1:]
    if key != key.strip():
        start, end = len(key) - len(key.lstrip()), len(key.rstrip())
        if end == 0:  # whitespace only
            return "".join(map(_percent, key))
        key = (
            "".join(map(_percent, key[:start])) + key[start:end] + "".join(map(_percent, key[end:]))
        )
    return key


def unescape_key(key: str) -> str:
    if "%" not in key:
        return key
    return _ESCAPE_SEQUENCE.sub(lambda match: chr(int(match.group(1) or match.group(2), 16)), key)


#: The one key of the object that wraps a list directly inside a list (FerretDB 1.x refuses
#: nested arrays). No escaped key can be this: an escaped ``%`` is always ``%25``.
_LIST_IN_LIST = "%a"


def escape(value: Any, in_list: bool = False) -> Any:
    """The value with every mapping key made storable, and every list that sits directly
    in a list wrapped (see the module docstring)."""
    if isinstance(value, Mapping):
        return {escape_key(str(k)): escape(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [escape(v, True) for v in value]
        return {_LIST_IN_LIST: items} if in_list else items
    return value


#: What :func:`unescape` walks into; anything else is a leaf, kept as it is.
_CONTAINERS = (dict, list)


def unescape(value: Any) -> Any:
    """The value as it was before :func:`escape`. Every stored document read goes through
    it, so it calls itself only for containers and looks a key up only when it holds a
    ``%``: a leaf or a plain key costs no call of its own (docs/performance.md, the
    dialog read)."""
    if isinstance(value, dict):
        if len(value) == 1 and _LIST_IN_LIST in value:
            return [unescape(v) for v in value[_LIST_IN_LIST]]
        plain = {}
        for key, item in value.items():
            if isinstance(item, _CONTAINERS):
                item = unescape(item)
            plain[unescape_key(key) if "%" in key else key] = item
        return plain
    if isinstance(value, list):
        return [unescape(v) if isinstance(v, _CONTAINERS) else v for v in value]
    return value


def merge_set(prefix: str, updates: Mapping[str, Any]) -> Doc:
    """``$set`` paths that merge ``updates`` into the sub-document at ``prefix`` key by
    key: each key is its own atomic field update, so concurrent merges of other keys
    survive. Keys were checked upstream (non-empty, no '.'); escaping keeps it so."""
    return {f"{prefix}.{escape_key(key)}": escape(value) for key, value in updates.items()}
