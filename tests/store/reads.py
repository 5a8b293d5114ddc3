"""Reads the contract tests make through the store's own operations: the user and their open
dialog as a turn starts (:meth:`TurnStore.open_turn`, with no window), and a dialog's last
utterances as a reader sees them (:meth:`DialogReader.dialog`)."""

from __future__ import annotations

from agent.state.models import Utterance
from agent.store import Store
from agent.store.base import TurnStart


async def opened(
    store: Store, user_id: str, channel_type: str = "http_client", arm: str | None = None
) -> TurnStart:
    """The user (created on first contact) and their open dialog (opened when none is)."""
    return await store.turns.open_turn(user_id, channel_type, 0, arm)


async def last_utterances(store: Store, dialog_id: str, limit: int) -> list[Utterance]:
    """The dialog's last ``limit`` utterances, oldest first (none for an unknown dialog)."""
    dialog = await store.reader.dialog(dialog_id)
    return [] if dialog is None or limit <= 0 else dialog.utterances[-limit:]
