"""How the SQLite store spells JSON, and the merge for keys a JSON path cannot address.

SQLite's JSON path compares a quoted label (``$.attributes."key"``) with the stored key's
JSON spelling as it stands, escapes and all, while it writes a new key escaped. A key
whose spelling differs from its text (a ``\\``, a tab, any control character) therefore
never matches its own stored copy: ``json_set`` would append a second copy on every merge
instead of replacing the first (SQLite 3.40; newer releases unescape labels, older ones
do not). Such keys are merged here instead, in Python, by one SQL function call inside the
turn's transaction; plain keys keep the single ``json_set``. Everything the store writes is
spelled one way (:func:`canonical`: UTF-8 as it is, only what JSON must escape escaped), so a
plain key's stored spelling is always its own text.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

#: What JSON must escape in a string: a key holding any of these is not spelled as its text.
_ESCAPED = re.compile(r'["\\\x00-\x1f]')
#: The SQL function (registered on each connection) that merges such keys.
MERGE_FUNCTION = "chorus_json_merge"


def needs_escaping(key: str) -> bool:
    """True for a key a quoted JSON path label cannot address (see the module docstring)."""
    return _ESCAPED.search(key) is not None


def canonical(value: Any) -> str:
    """The one spelling the store writes: compact, non-ASCII characters as they are (a
    ``\\u00e9`` spelling of a key would not match a later path label ``é`` either)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def merged(doc: str, path: str, updates: str) -> str:
    """``doc`` with the object at ``path`` (a JSON list of keys, e.g. ``["bot",
    "attributes"]``) updated by ``updates`` (a JSON object), as ``json_set`` would: a missing
    object on the way is created, a non-object one is left alone."""
    data = json.loads(doc)
    target = data
    for key in json.loads(path):
        if not isinstance(target, dict):
            return canonical(data)
        target = target.setdefault(key, {})
    if isinstance(target, dict):
        target.update(json.loads(updates))
    return canonical(data)


def register(db: sqlite3.Connection) -> None:
    """Make :func:`merged` callable from this connection's statements."""
    db.create_function(MERGE_FUNCTION, 3, merged, deterministic=True)
