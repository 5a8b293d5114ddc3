"""The data lifecycle on SQLite: a sweep the agent runs in the background.

Each rule walks its table by ``rowid`` from where its previous pass stopped, ``batch``
rows at a time, and starts over after the last row. The walk filters on nothing but
``rowid`` (a filter in its ``WHERE`` would have SQLite skip every row that does not match
to fill the batch); each row's test is a column of the query instead. So a pass reads at
most ``batch`` rows per rule and writes in short transactions, whatever the tables hold,
and holds the event loop (the store runs on it, see :mod:`agent.store.sqlite`) for a
bounded time. No index or column is needed, so the schema is unchanged. Where a pass
stopped is kept in memory: an agent started again starts a new round.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent.store.base import Retention, Swept
from agent.store.compaction import compacted
from agent.store.sqlite.base import SqliteBase, Statement

#: Tables whose rows ``sizes`` counts.
_TABLES = ("users", "dialogs", "utterances", "idempotency_keys", "lines")
#: The dialog's user has a place in line not yet finished: a turn in flight (or one a dead
#: agent left, given up when the user's next message comes).
_IN_LINE = (
    "EXISTS (SELECT 1 FROM lines l JOIN users u ON u.user_id = l.user_id "
    "WHERE u.id = dialogs.human_id AND l.done = 0)"
)


#: The utterance (``u``) has something compaction removes: checked by SQLite, so a row
#: compacted earlier costs its next round no JSON parsing in Python.
_BULKY = (
    "(json_extract(u.doc, '$.annotations') NOT IN ('{}') "
    "OR json_array_length(u.doc, '$.hypotheses') > 1 "
    "OR json_array_length(u.doc, '$.trace') > 0 "
    "OR json_array_length(u.doc, '$.errors') > 0 "
    "OR json_array_length(u.doc, '$.skill_selection') > 0 "
    "OR json_extract(u.doc, '$.hypotheses[0].annotations') NOT IN ('{}'))"
)


def _at(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


class SqliteLifecycle(SqliteBase):
    """:class:`agent.store.base.LifecycleStore` on SQLite."""

    _cursors: dict[str, int]

    async def _rows(self, rule: str, sql: str, batch: int) -> tuple[list[Any], bool]:
        """The next ``batch`` rows of the rule's walk (``sql`` selects ``rowid`` first and
        takes the cursor and the batch as its last two arguments); whether the walk ended."""
        if not hasattr(self, "_cursors"):
            self._cursors = {}
        rows = await self._all(sql, [self._cursors.get(rule, 0), batch])
        ended = len(rows) < batch
        self._cursors[rule] = 0 if ended else int(rows[-1][0])
        return rows, ended

    async def sweep(self, retention: Retention, now: datetime, batch: int) -> Swept:
        swept = Swept(round_done=True)
        statements: list[Statement] = []
        if retention.closed_dialogs is not None:
            swept.round_done &= await self._expire(now - retention.closed_dialogs, batch, swept)
        if retention.idle_dialogs is not None:
            ended = await self._close_idle(
                now - retention.idle_dialogs, now, batch, swept, statements
            )
            swept.round_done &= ended
        if retention.compact_turns is not None:
            ended = await self._compact(now - retention.compact_turns, batch, swept, statements)
            swept.round_done &= ended
        if statements:
            rows = await self._write(*statements)
            swept.dialogs_closed = sum(
                1
                for (sql, _), row in zip(statements, rows, strict=True)
                if sql.startswith("UPDATE dialogs") and row is not None
            )
        return swept

    async def _expire(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Delete dialogs closed before ``before``: their utterances, at most ``batch`` of
        them a pass, and the dialog in the same transaction once none is left. A dialog
        with more is taken up again by the next pass, so no utterance outlives its
        dialog."""
        rows, ended = await self._rows(
            "closed",
            "SELECT rowid, id, CASE WHEN active = 0 AND NOT "
            f"{_IN_LINE} THEN json_extract(doc, '$.date_finish') END FROM dialogs "
            "WHERE rowid > ? ORDER BY rowid LIMIT ?",
            batch,
        )
        budget, statements = batch, []
        for rowid, dialog_id, finish in rows:
            finished = _at(finish)  # None: open, or its user has a message in line
            if finished is None or finished >= before:
                continue
            if budget <= 0:  # this one and the rest next pass
                self._cursors["closed"], ended = rowid - 1, False
                break
            (held,) = await self._one(
                "SELECT COUNT(*) FROM (SELECT 1 FROM utterances WHERE dialog_id = ? LIMIT ?)",
                [dialog_id, budget + 1],
            )
            statements.append(
                (
                    "DELETE FROM utterances WHERE rowid IN (SELECT rowid FROM utterances "
                    "WHERE dialog_id = ? LIMIT ?)",
                    [dialog_id, budget],
                )
            )
            swept.utterances_deleted += min(held, budget)
            if held > budget:  # more than this pass may delete: the rest next pass
                self._cursors["closed"], ended = rowid - 1, False
                break
            budget -= held
            statements.append(
                (
                    "DELETE FROM dialogs WHERE id = ? AND active = 0 AND NOT EXISTS "
                    "(SELECT 1 FROM utterances WHERE dialog_id = ?) RETURNING id",
                    [dialog_id, dialog_id],
                )
            )
        if statements:  # one transaction: a few milliseconds, whatever the dialogs hold
            returned = await self._write(*statements)
            swept.dialogs_deleted += sum(
                1
                for (sql, _), row in zip(statements, returned, strict=True)
                if sql.startswith("DELETE FROM dialogs") and row is not None
            )
        return ended

    async def _close_idle(
        self, before: datetime, now: datetime, batch: int, swept: Swept, out: list[Statement]
    ) -> bool:
        """Close open dialogs whose last utterance (or start) is older than ``before``,
        unless their user has a message in line."""
        rows, ended = await self._rows(
            "idle",
            "SELECT d.rowid, d.id, CASE WHEN d.active = 1 THEN json_extract(d.doc, "
            "'$.date_start') END, CASE WHEN d.active = 1 THEN (SELECT json_extract(u.doc, "
            "'$.date_time') FROM utterances u WHERE u.dialog_id = d.id ORDER BY u.seq DESC "
            "LIMIT 1) END FROM dialogs d WHERE d.rowid > ? ORDER BY d.rowid LIMIT ?",
            batch,
        )
        for _, dialog_id, start, last in rows:
            latest = _at(last) or _at(start)
            if latest is None or latest >= before:
                continue
            out.append(
                (
                    "UPDATE dialogs SET active = 0, doc = json_set(doc, '$.date_finish', ?) "
                    f"WHERE id = ? AND active = 1 AND NOT {_IN_LINE} RETURNING id",
                    [now.isoformat(), dialog_id],
                )
            )
        return ended

    async def _compact(
        self, before: datetime, batch: int, swept: Swept, out: list[Statement]
    ) -> bool:
        """Compact answered turns older than ``before``: the human utterance with its
        answer's skill read alongside (an unanswered one is left alone: a turn in flight)."""
        rows, ended = await self._rows(
            "compact",
            f"SELECT u.rowid, CASE WHEN {_BULKY} THEN u.doc END, (SELECT "
            "json_extract(b.doc, '$.active_skill') FROM utterances b WHERE b.dialog_id = "
            "u.dialog_id AND b.seq = u.seq + 1 AND b.speaker = 'bot') FROM utterances u "
            "WHERE u.rowid > ? ORDER BY u.rowid LIMIT ?",
            batch,
        )
        for rowid, text, chosen_skill in rows:
            if text is None:  # compact already: not read into Python
                continue
            doc = json.loads(text)
            at = _at(doc.get("date_time"))
            if at is None or at >= before:
                continue
            if doc.get("speaker") == "human" and chosen_skill is None:
                continue
            smaller = compacted(doc, chosen_skill)
            if smaller is not None:
                out.append(
                    (
                        "UPDATE utterances SET doc = ? WHERE rowid = ?",
                        [json.dumps(smaller, ensure_ascii=False, separators=(",", ":")), rowid],
                    )
                )
                swept.utterances_compacted += 1
        return ended

    async def sizes(self) -> dict[str, int]:
        return {
            table: int((await self._one(f"SELECT COUNT(*) FROM {table}"))[0]) for table in _TABLES
        }
