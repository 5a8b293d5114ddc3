"""The flow's request value: what a chat endpoint hands :meth:`MessageFlow.reply`."""

from __future__ import annotations

import pytest

from agent.flow import Incoming


def test_a_keyed_message_must_carry_what_a_retry_repeats() -> None:
    """Without the request's fingerprint, a reused key could never be told from a retry,
    and the other message would silently get this one's answer."""
    with pytest.raises(ValueError, match="fingerprint"):
        Incoming("alice", "hi", key="chat:m-1")
    assert Incoming("alice", "hi", key="chat:m-1", fingerprint="f").key == "chat:m-1"
    assert Incoming("alice", "hi").key is None


def test_closing_commands_close_only_where_the_endpoint_speaks_them() -> None:
    assert Incoming("alice", " /close ", closing_commands=True).closes
    assert not Incoming("alice", "/close").closes  # ParlAI's endpoint: an ordinary text
    assert not Incoming("alice", "/closed", closing_commands=True).closes
