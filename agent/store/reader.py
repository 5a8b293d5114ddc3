"""Reading the store without any means of writing it: what ``chorus replay`` needs.

A replay must leave the store exactly as it found it (on SQLite, byte for byte), even
while the agent serves from it. :func:`open_reader` opens the store so that it cannot
write (SQLite read-only, no migration, no index created) and hands back only the reads,
as a :class:`DialogReader`: code holding one has no write method to call by mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.state.models import Dialog


class DialogReader(Protocol):
    """The dialog reads of :class:`agent.store.base.DialogStore`, and nothing else."""

    async def dialog(self, dialog_id: str) -> Dialog | None:
        """The whole dialog, or None."""
        ...

    async def dialogs(self, dialog_ids: Sequence[str]) -> list[Dialog]:
        """Those of the dialogs that are stored, in the order asked."""
        ...

    async def user_dialogs(self, user_id: str) -> list[Dialog] | None:
        """The user's dialogs, oldest first; None when no such user is stored."""
        ...

    async def list_dialog_ids(self, offset: int, limit: int, active: bool | None) -> list[str]:
        """Dialog ids in the order the dialogs were opened, a page at a time."""
        ...

    async def close(self) -> None: ...


async def open_reader(url: str) -> DialogReader:
    """The store at ``url`` (``sqlite:///path`` or ``mongodb://...``) opened for reading
    only; it must be of this release's schema version, since migrating it would write."""
    if url.startswith("sqlite://"):
        from agent.store.sqlite import SqliteStore

        return await SqliteStore.open_read_only(url)
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from agent.store.mongo import MongoStore

        return await MongoStore.open(url, read_only=True)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:///path or mongodb://host")
