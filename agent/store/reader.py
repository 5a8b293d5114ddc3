"""Reading the dialogs: :class:`DialogReader`, the part of the store the read API, the
exports and ``chorus replay`` use, and :func:`open_reader`, the store opened for reading only.

A replay must leave the store exactly as it found it (on SQLite, byte for byte), even
while the agent serves from it. :func:`open_reader` opens the store so that it cannot
write (SQLite read-only, no migration, no index created) and hands back only the reads
and the means to close it, as a :class:`ReadOnlyStore`: code holding one has no write
method to call by mistake.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from agent.state.models import Dialog


class DialogReader(Protocol):
    """Whole dialogs and their ids, for reading: the read API, exports, statistics and
    replays."""

    async def dialog(self, dialog_id: str) -> Dialog | None:
        """The whole dialog, for reading."""
        ...

    async def dialogs(self, dialog_ids: Sequence[str]) -> list[Dialog]:
        """The whole dialogs of these ids, in their order, those that do not exist left
        out: how an export reads a store, a group of dialogs at a time (on MongoDB, one
        query for all their utterances rather than one per dialog)."""
        ...

    async def user_dialogs(self, user_id: str) -> list[Dialog] | None:
        """All dialogs of a user, oldest first; None for an unknown user."""
        ...

    async def list_dialog_ids(self, offset: int, limit: int, active: bool | None) -> list[str]:
        """Dialog ids in the order the dialogs were opened, from ``offset``, at most
        ``limit``; ``active`` True/False: only open/closed dialogs (dp-agent's
        ``GET /api/dialogs/``)."""
        ...

    async def dialog_by_dp_agent_id(self, object_id: str) -> str | None:
        """The id of the dialog imported from dp-agent whose dp-agent ``_id`` is
        ``object_id`` (24 lower-case hex digits); None when there is none."""
        ...

    async def dialog_starts(self, prefix: str) -> dict[str, datetime]:
        """The ids and starts of the dialogs whose id starts with ``prefix`` (a few at most):
        how a dp-agent ``_id`` (:mod:`agent.state.dp_agent`) is found."""
        ...

    async def stored_dialog_ids(self, dialog_ids: Sequence[str]) -> set[str]:
        """Of these dialog ids, those stored (each read by its id): what an import checks
        before it writes (:mod:`agent.backup.checks`)."""
        ...

    async def utterance_dialogs(self, utt_ids: Sequence[str]) -> dict[str, str]:
        """Of these utterance ids, those stored, each with the id of the dialog that holds
        it (each read by its id): an import refuses an utterance id another dialog holds."""
        ...


class ReadOnlyStore(Protocol):
    """A store opened for reading only (:func:`open_reader`): its reads, and closing it."""

    @property
    def reader(self) -> DialogReader: ...

    async def close(self) -> None: ...


async def open_reader(url: str) -> ReadOnlyStore:
    """The store at ``url`` (``sqlite:///path`` or ``mongodb://...``) opened for reading
    only; it must be of this release's schema version, since migrating it would write."""
    if url.startswith("sqlite://"):
        from agent.store.sqlite import SqliteStore

        return await SqliteStore.open_read_only(url)
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from agent.store.mongo import MongoStore

        return await MongoStore.open(url, read_only=True)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:///path or mongodb://host")
