"""The dialogs' handoffs on SQLite (:class:`agent.store.handoffs.HandoffStore`): one row per
dialog in ``handoffs``, its state and request time in columns (what the conditional
writes compare and the inbox sorts by) beside the whole record as JSON.

Each change is one statement whose ``WHERE`` holds the state it changes from (and the
request's time, which a new request changes), with ``RETURNING``: of two writers, on one
loop or in two processes sharing the file, one changes the row and the other gets no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent.state.handoff import Handoff, HandoffState, ReturnedBy
from agent.state.models import BotUtterance, HumanUtterance, Utterance
from agent.store.handoffs import claimed, returned
from agent.store.sqlite.base import SqliteBase, document_text, insert_utterance, utterance_of


def _read(row: tuple[str] | None) -> Handoff | None:
    return None if row is None else Handoff.model_validate_json(row[0])


class SqliteHandoffs(SqliteBase):
    """See the module docstring."""

    async def request_handoff(self, handoff: Handoff) -> Handoff | None:
        rows = await self.write(
            (
                "INSERT INTO handoffs (dialog_id, user_id, state, requested_at, doc) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (dialog_id) DO UPDATE SET "
                "user_id = excluded.user_id, state = excluded.state, "
                "requested_at = excluded.requested_at, doc = excluded.doc "
                "WHERE handoffs.state = 'returned' RETURNING doc",
                [
                    handoff.dialog_id,
                    handoff.user_id,
                    handoff.state,
                    handoff.requested_at.timestamp(),
                    document_text(handoff),
                ],
            )
        )
        return _read(rows[0])

    async def _swap(self, before: Handoff, after: Handoff) -> Handoff | None:
        """``after`` in place of ``before``, unless the row changed since it was read."""
        rows = await self.write(
            (
                "UPDATE handoffs SET state = ?, doc = ? WHERE dialog_id = ? AND state = ? "
                "AND requested_at = ? RETURNING doc",
                [
                    after.state,
                    document_text(after),
                    before.dialog_id,
                    before.state,
                    before.requested_at.timestamp(),
                ],
            )
        )
        return _read(rows[0])

    async def claim_handoff(self, dialog_id: str, operator: str, now: datetime) -> Handoff | None:
        current = await self.handoff(dialog_id)
        held = claimed(current, operator, now) if current else None
        return await self._swap(current, held) if current and held else None

    async def return_handoff(
        self,
        dialog_id: str,
        by: ReturnedBy,
        now: datetime,
        *,
        states: Sequence[HandoffState] = ("waiting", "held"),
        operator: str | None = None,
        requested_before: datetime | None = None,
    ) -> Handoff | None:
        current = await self.handoff(dialog_id)
        back = returned(current, by, now, states, operator, requested_before) if current else None
        return await self._swap(current, back) if current and back else None

    async def handoff(self, dialog_id: str) -> Handoff | None:
        return _read(
            await self.fetch_one("SELECT doc FROM handoffs WHERE dialog_id = ?", [dialog_id])
        )

    async def handoffs(
        self,
        states: Sequence[HandoffState],
        *,
        limit: int,
        requested_before: datetime | None = None,
    ) -> list[Handoff]:
        found: list[Handoff] = []
        for state in ("waiting", "held", "returned"):  # the inbox's order
            if state not in states or len(found) >= limit:
                continue
            before = float("inf") if requested_before is None else requested_before.timestamp()
            rows = await self.fetch_all(
                "SELECT doc FROM handoffs WHERE state = ? AND requested_at < ? "
                "ORDER BY requested_at LIMIT ?",
                [state, before, limit - len(found)],
            )
            found += [Handoff.model_validate_json(row[0]) for row in rows]
        return found

    async def append_utterance(
        self, dialog_id: str, user_id: str, utterance: HumanUtterance | BotUtterance
    ) -> None:
        await self.write(insert_utterance(dialog_id, utterance))

    async def utterances_after(
        self, dialog_id: str, after: str | None, *, limit: int
    ) -> list[Utterance] | None:
        seq = -1
        if after is not None:
            row = await self.fetch_one(
                "SELECT seq FROM utterances WHERE utt_id = ? AND dialog_id = ?", [after, dialog_id]
            )
            if row is None:
                return None
            seq = int(row[0])
        rows = await self.fetch_all(
            "SELECT doc FROM utterances WHERE dialog_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            [dialog_id, seq, limit],
        )
        return [utterance_of.validate_json(row[0]) for row in rows]
