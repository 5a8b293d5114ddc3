"""ParlAI's Message semantics."""

from __future__ import annotations

import math

import pytest

from agent.message import Message, MessageOverwriteError


def test_setting_an_existing_key_is_refused_and_leaves_the_value() -> None:
    message = Message({"text": "hello"})
    with pytest.raises(MessageOverwriteError, match="already contains key `text`") as error:
        message["text"] = "changed"
    assert error.value.key == "text"
    assert message["text"] == "hello"


def test_update_and_setdefault_cannot_overwrite_either() -> None:
    message = Message({"id": "a"})
    with pytest.raises(MessageOverwriteError):
        message.update({"id": "b"})
    with pytest.raises(MessageOverwriteError):
        message.update(id="b")
    assert message.setdefault("id", "c") == "a"
    message.update({"labels": ["x"]})
    assert message == {"id": "a", "labels": ["x"]}


def test_copy_is_a_message_and_shallow() -> None:
    original = Message({"labels": ["x"]})
    copy = original.copy()
    assert isinstance(copy, Message) and copy == original and copy is not original
    with pytest.raises(MessageOverwriteError):
        copy["labels"] = []
    assert copy["labels"] is original["labels"]


def test_json_safe_payload_strips_internal_and_unsafe_fields() -> None:
    message = Message(
        {
            "text": "hi",
            "id": "bot",
            "text_candidates": ["a", "b"],
            "episode_done": False,
            "text_vec": [1, 2],
            "_private": 1,
            "blob": b"\x00",
            "tags": {"a"},
            "score": math.nan,
            "nested": {"ok": [1, 2.5, None]},
        }
    )
    payload = message.json_safe_payload()
    assert payload == {
        "text": "hi",
        "id": "bot",
        "text_candidates": ["a", "b"],
        "episode_done": False,
        "nested": {"ok": [1, 2.5, None]},
    }
    assert type(payload) is dict
