"""The MongoDB store's key and value codec: every key round-trips, and documents written
before an escape existed still read back as they were."""

from __future__ import annotations

from agent.store.mongo import escape, escape_key, unescape, unescape_key


def test_keys_that_mongodb_or_ferretdb_would_misread_round_trip() -> None:
    for key in [
        "a.b",
        "$set",
        "%",
        "%2E",
        "a\x00b",
        " lead",
        "trail ",
        "\r",
        "\u2003x",
        "$",
        ".",
        "ok",
        "with space",
        "%u2003",
        "%24",
    ]:
        escaped = escape_key(key)
        assert "." not in escaped and not escaped.startswith("$")
        assert escaped == escaped.strip() and "\x00" not in escaped
        assert unescape_key(escaped) == key


def test_lists_in_lists_are_wrapped_and_old_native_ones_still_read() -> None:
    value = {"m": [[1, [2]], [], {"k": [[3]]}]}
    stored = escape(value)
    assert stored == {"m": [{"%a": [1, {"%a": [2]}]}, {"%a": []}, {"k": [{"%a": [3]}]}]}
    assert unescape(stored) == value
    assert unescape({"m": [[1, 2], [3]], "a%2Eb": 1}) == {"m": [[1, 2], [3]], "a.b": 1}
