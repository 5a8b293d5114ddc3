"""Restoring from a backup, on every store: a dialog is stored whole and once, the stored
user is kept, an open dialog stays open unless the user has another, and a restored open
dialog takes the next turn."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from agent.backup.files import GROUP, DialogFilter, all_dialog_ids, export_lines
from agent.state.models import Dialog, Human, HumanUtterance, Profile
from agent.store import Store
from agent.store.base import Restored, StoreWriteRefused
from tests.store.reads import opened
from tests.store.test_contract import turn


async def backed_up(store: Store, user: str) -> Dialog:
    """A dialog of two turns with ratings and attributes, as a backup holds it."""
    dialog_id, bot = await turn(store, user, "hello", human_attributes={"seen": 1})
    await turn(store, user, "again", bot_attributes={"mood": "calm"})
    await store.ratings.add_utterance_rating(bot.utt_id, {"rating": "good"}, user_id=user, rating=5)
    await store.ratings.add_dialog_rating(dialog_id, {"rating": 3}, rating=3)
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    return dialog


async def test_a_restored_dialog_reads_back_as_it_was_and_is_stored_once(
    store: Store, another_agent_store: Store
) -> None:
    dialog = await backed_up(store, "ann")
    await store.delete_user("ann")
    assert await store.restore.restore_user(dialog.human)
    assert not await store.restore.restore_user(dialog.human.model_copy(update={"attributes": {}}))
    assert await store.restore.restore_dialog("ann", dialog, active=True) is Restored.STORED
    assert await store.restore.restore_dialog("ann", dialog, active=True) is Restored.PRESENT
    read = await another_agent_store.reader.dialog(dialog.dialog_id)
    assert read is not None
    assert read.model_dump(exclude={"human": {"id"}}) == dialog.model_dump(
        exclude={"human": {"id"}}
    )
    assert await store.reader.user_dialogs("ann") == [read]
    # It is the user's open dialog: the next turn continues it, after its utterances.
    continued, _ = await turn(another_agent_store, "ann", "and now")
    assert continued == dialog.dialog_id
    after = await store.reader.dialog(dialog.dialog_id)
    assert after is not None
    assert [u.text for u in after.utterances] == ["hello", "ok", "again", "ok", "and now", "ok"]


async def test_an_open_dialog_is_restored_closed_beside_the_users_own_open_one(
    store: Store,
) -> None:
    dialog = await backed_up(store, "ann")
    await store.delete_user("ann")
    newer, _ = await turn(store, "ann", "I am back")
    human = Human(user_external_id="ann", profile=Profile(name="Ann"))
    assert not await store.restore.restore_user(human)  # the stored user is newer: kept
    assert await store.restore.restore_dialog("ann", dialog, active=True) is Restored.STORED_CLOSED
    restored = await store.reader.dialog(dialog.dialog_id)
    assert restored is not None and restored.date_finish is not None
    assert restored.human.profile.name is None
    assert ((await opened(store, "ann", "http_client")).dialog).dialog_id == newer


async def test_a_dialog_restored_for_an_unknown_user_creates_them(store: Store) -> None:
    dialog = await backed_up(store, "ann")
    moved = dialog.model_copy(update={"dialog_id": dialog.dialog_id + "x", "utterances": []})
    assert await store.restore.restore_dialog("bob", moved, active=False) is Restored.STORED
    dialogs = await store.reader.user_dialogs("bob")
    assert dialogs is not None and [d.dialog_id for d in dialogs] == [moved.dialog_id]


async def test_a_restore_cut_short_on_mongodb_is_finished_by_running_it_again(
    store: Store, store_url: str
) -> None:
    """Without transactions, a restore stopped before the dialog's own document (written
    last) leaves the dialog unseen; the same restore again stores it whole, once."""
    if not store_url.startswith("mongodb"):
        pytest.skip("SQLite restores a dialog in one transaction")
    dialog = await backed_up(store, "ann")
    await store.delete_user("ann")
    assert await store.restore.restore_dialog("ann", dialog, active=False) is Restored.STORED
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(store_url)
    try:  # as if the import had stopped just before its last write
        await client.get_default_database()["dialogs"].delete_one({"_id": dialog.dialog_id})
    finally:
        await client.close()
    assert await store.reader.dialog(dialog.dialog_id) is None
    assert await store.restore.restore_dialog("ann", dialog, active=False) is Restored.STORED
    read = await store.reader.dialog(dialog.dialog_id)
    assert read is not None and read.utterances == dialog.utterances


async def test_an_export_of_a_store_in_use_misses_no_dialog_when_users_are_erased(
    store: Store,
) -> None:
    """Dialogs opened during the export are read; an erasure moves the later dialogs back
    in the list, and none of them is skipped (one read twice is harmless on import)."""
    opened = [(await turn(store, f"user-{n}", "hi"))[0] for n in range(9)]
    read: list[str] = []
    async for dialog_id in all_dialog_ids(store.reader, page=2):
        read.append(dialog_id)
        if len(read) == 3:
            await store.delete_user("user-0")
            await store.delete_user("user-1")
        if len(read) == 5:
            await store.delete_user("user-4")  # the last id read, erased itself
            opened.append((await turn(store, "late", "hi"))[0])
    assert set(opened[5:]) <= set(read)
    assert read[:5] == opened[:5]


async def test_an_export_of_more_dialogs_than_it_reads_at_once_has_each_once_in_order(
    store: Store,
) -> None:
    started = []
    for number in range(GROUP + 2):
        user = f"user{number % 7}"
        head = (await opened(store, user, "http_client")).dialog
        if number % 10 == 0:
            await store.turns.add_utterance(head.dialog_id, HumanUtterance(text=f"hi {number}"))
        await store.turns.close_active_dialog(user)
        started.append(head.dialog_id)
    exported = [
        json.loads(line)
        async for line, is_dialog in export_lines(store.reader, DialogFilter())
        if is_dialog
    ]
    assert [record["dialog"]["dialog_id"] for record in exported] == started
    for number, record in enumerate(exported):
        texts = [u["text"] for u in record["dialog"]["utterances"]]
        assert texts == ([f"hi {number}"] if number % 10 == 0 else [])
        assert record["user_id"] == f"user{number % 7}"


async def test_a_restore_never_overwrites_another_dialogs_utterances(store: Store) -> None:
    """Even past an import's checks (another writer between them and the write): an
    utterance id another dialog holds refuses the restore, the other dialog's utterance
    stays as it was, and nothing of the refused dialog is kept."""
    victim = await backed_up(store, "ann")
    fresh = [HumanUtterance(text="first"), HumanUtterance(text="second")]
    stolen = [u.model_copy(update={"text": "stolen"}) for u in victim.utterances]
    thief = victim.model_copy(
        update={"dialog_id": victim.dialog_id + "x", "utterances": [*fresh, *stolen]}
    )
    with pytest.raises(StoreWriteRefused, match="an utterance id is stored in another dialog"):
        await store.restore.restore_dialog("mallory", thief, active=False)
    assert await store.reader.dialog(victim.dialog_id) == victim
    assert await store.reader.dialog(thief.dialog_id) is None
    assert await store.reader.utterance_dialogs([u.utt_id for u in thief.utterances]) == {
        u.utt_id: victim.dialog_id for u in victim.utterances
    }
    twice = victim.model_copy(
        update={"dialog_id": victim.dialog_id + "y", "utterances": [fresh[0], fresh[0]]}
    )
    with pytest.raises(StoreWriteRefused):
        await store.restore.restore_dialog("mallory", twice, active=False)
    assert await store.reader.dialog(twice.dialog_id) is None
