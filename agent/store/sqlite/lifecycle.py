"""The data lifecycle on SQLite: a sweep the agent runs in the background.

Each rule walks its table by ``rowid`` from where its previous pass stopped, ``batch``
rows at a time, and starts over after the last row. The walk filters on nothing but
``rowid`` (a filter in its ``WHERE`` would have SQLite skip every row that does not match
to fill the batch); each row's test is a column of the query instead. No index or column is
needed, so the schema is unchanged. Where a pass stopped is kept in memory: an agent
started again starts a new round.

The store runs on the event loop (see :mod:`agent.store.sqlite`), so whatever a pass does
between two awaits is time no turn of this agent runs. A pass therefore goes in steps: each
reads a few rows, does their Python work (compaction's JSON) and writes them in its own
short transaction, then yields to the loop. A step's size (:class:`_Pace`) is adapted to
the time the previous ones took, so that each holds the loop for about
:data:`STEP_BUDGET`, whatever the documents weigh; ``batch`` still bounds what one pass
reads and writes in all.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from datetime import datetime
from typing import Any

from agent.store.base import Swept
from agent.store.compaction import compacted
from agent.store.sqlite.base import SqliteBase

#: How long one step of a pass may hold the event loop, in seconds: a turn arriving
#: meanwhile waits at most about this long for the sweep.
STEP_BUDGET = 0.002
#: Rows of a rule's first step, before its pace is known.
_FIRST_STEP = 16

#: Tables whose rows ``sizes`` counts.
_TABLES = ("users", "dialogs", "utterances", "idempotency_keys", "lines")
#: The dialog's user has a place in the queue not yet finished: a turn in flight (or one a dead
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


class _Pace:
    """How many rows a rule's next step takes: scaled after each step by how far it was
    from :data:`STEP_BUDGET` (at most doubled at once, at least one row, at most the
    batch). Kept from pass to pass, so a pass starts at the size the last one learnt."""

    def __init__(self) -> None:
        self.size = _FIRST_STEP
        self._began = time.perf_counter()

    def start(self) -> None:
        self._began = time.perf_counter()

    async def done(self, limit: int) -> None:
        """The step is over: adapt the next one's size, then let the loop run others."""
        took = time.perf_counter() - self._began
        scaled = int(self.size * STEP_BUDGET / took) if took > 0 else 2 * self.size
        self.size = max(1, min(limit, 2 * self.size, scaled))
        await asyncio.sleep(0)
        self._began = time.perf_counter()


class SqliteLifecycle(SqliteBase):
    """:class:`agent.store.base.LifecycleStore` on SQLite."""

    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__(db)
        #: rule → the ``rowid`` its walk stopped after (kept in memory: an agent started
        #: again starts a new round)
        self._cursors: dict[str, int] = {}
        #: rule → the pace its steps learnt
        self._paces: dict[str, _Pace] = {}

    def _pace(self, rule: str) -> _Pace:
        pace = self._paces.setdefault(rule, _Pace())
        pace.start()
        return pace

    async def _rows(self, rule: str, sql: str, limit: int) -> tuple[list[Any], bool]:
        """The next ``limit`` rows of the rule's walk (``sql`` selects ``rowid`` first and
        takes the cursor and the limit as its last two arguments); whether the walk ended."""
        rows = await self.fetch_all(sql, [self._cursors.get(rule, 0), limit])
        ended = len(rows) < limit
        self._cursors[rule] = 0 if ended else int(rows[-1][0])
        return rows, ended

    async def delete_closed(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Delete dialogs closed before ``before``: their utterances, at most ``batch`` of
        them a pass and a step's worth per transaction, then the dialog once none is left
        (conditionally: still closed, no utterance). A dialog with more is taken up again by
        the next pass, so no utterance outlives its dialog."""
        pace = self._pace("closed")
        budget, read = batch, 0
        while read < batch:
            rows, ended = await self._rows(
                "closed",
                "SELECT rowid, id, CASE WHEN active = 0 AND NOT "
                f"{_IN_LINE} THEN json_extract(doc, '$.date_finish') END FROM dialogs "
                "WHERE rowid > ? ORDER BY rowid LIMIT ?",
                min(pace.size, batch - read),
            )
            read += len(rows)
            for rowid, dialog_id, finish in rows:
                finished = _at(finish)  # None: open, or its user has a message in queue
                if finished is None or finished >= before:
                    continue
                while True:  # its utterances, a step at a time
                    if budget <= 0:  # this dialog and the rest next pass
                        self._cursors["closed"] = rowid - 1
                        return False
                    asked = min(pace.size, budget)
                    _, (deleted,) = await self.write(
                        (
                            "DELETE FROM utterances WHERE rowid IN (SELECT rowid FROM "
                            "utterances WHERE dialog_id = ? LIMIT ?)",
                            [dialog_id, asked],
                        ),
                        ("SELECT changes()", []),
                    )
                    swept.utterances_deleted += deleted
                    budget -= deleted
                    await pace.done(batch)
                    if deleted < asked:  # none left
                        break
                (gone, _) = await self.write(
                    (
                        "DELETE FROM dialogs WHERE id = ? AND active = 0 AND NOT EXISTS "
                        "(SELECT 1 FROM utterances WHERE dialog_id = ?) RETURNING id",
                        [dialog_id, dialog_id],
                    ),
                    (  # its handoff, if it had one, goes with it
                        "DELETE FROM handoffs WHERE dialog_id = ? AND NOT EXISTS "
                        "(SELECT 1 FROM dialogs WHERE id = ?)",
                        [dialog_id, dialog_id],
                    ),
                )
                swept.dialogs_deleted += gone is not None
            await pace.done(batch)
            if ended:
                return True
        return False

    async def close_idle(self, before: datetime, now: datetime, batch: int, swept: Swept) -> bool:
        """Close open dialogs whose last utterance (or start) is older than ``before``,
        unless their user has a message in the queue."""
        pace = self._pace("idle")
        read = 0
        while read < batch:
            rows, ended = await self._rows(
                "idle",
                "SELECT d.rowid, d.id, CASE WHEN d.active = 1 THEN json_extract(d.doc, "
                "'$.date_start') END, CASE WHEN d.active = 1 THEN (SELECT json_extract(u.doc, "
                "'$.date_time') FROM utterances u WHERE u.dialog_id = d.id ORDER BY u.seq DESC "
                "LIMIT 1) END FROM dialogs d WHERE d.rowid > ? ORDER BY d.rowid LIMIT ?",
                min(pace.size, batch - read),
            )
            read += len(rows)
            statements = [
                (
                    "UPDATE dialogs SET active = 0, doc = json_set(doc, '$.date_finish', ?) "
                    f"WHERE id = ? AND active = 1 AND NOT {_IN_LINE} RETURNING id",
                    [now.isoformat(), dialog_id],
                )
                for _, dialog_id, start, last in rows
                if (latest := _at(last) or _at(start)) is not None and latest < before
            ]
            if statements:
                closed = await self.write(*statements)
                swept.dialogs_closed += sum(1 for row in closed if row is not None)
            await pace.done(batch)
            if ended:
                return True
        return False

    async def compact(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Compact answered turns older than ``before``: the human utterance with its
        answer's skill read alongside (an unanswered one is left alone: a turn in flight)."""
        pace = self._pace("compact")
        read = 0
        while read < batch:
            rows, ended = await self._rows(
                "compact",
                f"SELECT u.rowid, CASE WHEN {_BULKY} THEN u.doc END, (SELECT "
                "json_extract(b.doc, '$.active_skill') FROM utterances b WHERE b.dialog_id = "
                "u.dialog_id AND b.seq = u.seq + 1 AND b.speaker = 'bot') FROM utterances u "
                "WHERE u.rowid > ? ORDER BY u.rowid LIMIT ?",
                min(pace.size, batch - read),
            )
            read += len(rows)
            statements = []
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
                    compact = json.dumps(smaller, ensure_ascii=False, separators=(",", ":"))
                    statements.append(
                        ("UPDATE utterances SET doc = ? WHERE rowid = ?", [compact, rowid])
                    )
            if statements:
                await self.write(*statements)
                swept.utterances_compacted += len(statements)
            await pace.done(batch)
            if ended:
                return True
        return False

    async def sizes(self) -> dict[str, int]:
        return {
            table: int((await self.fetch_one(f"SELECT COUNT(*) FROM {table}"))[0])
            for table in _TABLES
        }
