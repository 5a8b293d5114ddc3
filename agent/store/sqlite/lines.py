"""The users' line on SQLite: one row per place, taken in one transaction."""

from __future__ import annotations

from datetime import datetime

from agent.store.sqlite.base import SqliteBase


class SqliteLines(SqliteBase):
    """:class:`agent.store.LineStore` on SQLite."""

    async def enqueue(self, external_id: str, lease_until: datetime) -> tuple[int, bool]:
        busy, (place,) = self._write(
            ("SELECT EXISTS (SELECT 1 FROM turn_queue WHERE user = ? AND done = 0)",
             [external_id]),
            ("INSERT INTO turn_queue (user, place, done, alive_until) VALUES (?, (SELECT "
             "COALESCE(MAX(place), -1) + 1 FROM turn_queue WHERE user = ?), 0, ?) "
             "RETURNING place", [external_id, external_id, lease_until.timestamp()]),
        )
        return place, not busy[0]

    async def first_in_line(self, external_id: str, place: int, now: datetime) -> bool:
        self._write((
            "UPDATE turn_queue SET done = 1 WHERE user = ? AND place < ? AND done = 0 "
            "AND alive_until < ?", [external_id, place, now.timestamp()]))
        row = self._one("SELECT 1 FROM turn_queue WHERE user = ? AND place < ? AND done = 0 "
                        "LIMIT 1", [external_id, place])
        return row is None

    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        self._write(*(("UPDATE turn_queue SET alive_until = ? WHERE user = ? AND place = ? "
                       "AND done = 0", [lease_until.timestamp(), user, place])
                      for user, place in places))

    async def leave(self, external_id: str, place: int, *, served: bool = True) -> None:
        """Done places below the newest are deleted: the newest keeps the count going.
        (``served`` is not needed here: the line is read with one query.)"""
        self._write(
            ("UPDATE turn_queue SET done = 1 WHERE user = ? AND place = ?", [external_id, place]),
            ("DELETE FROM turn_queue WHERE user = ? AND done = 1 AND place < (SELECT MAX(place) "
             "FROM turn_queue WHERE user = ?)", [external_id, external_id]),
        )
