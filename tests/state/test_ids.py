"""The ids the agent gives users, dialogs and utterances: what clients and other tools
that read the store (dp-agent's among them) take them for."""

from __future__ import annotations

import uuid

from agent.state.models import BotUtterance, HumanUtterance, new_id


def test_an_id_is_a_version_4_uuid_in_32_hex_digits() -> None:
    for _ in range(200):
        made = new_id()
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_each_utterance_gets_an_id_of_its_own() -> None:
    ids = {HumanUtterance(text="hi", user={}).utt_id for _ in range(500)}
    ids |= {
        BotUtterance(text="hi", orig_text="hi", active_skill="s", confidence=1.0, user={}).utt_id
        for _ in range(500)
    }
    assert len(ids) == 1000
