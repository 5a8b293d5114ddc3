"""The users' queues on SQLite: one row per place, taken in one transaction."""

from __future__ import annotations

from datetime import datetime

from agent.state.models import utc_now
from agent.store.base import Place, RunningTurn
from agent.store.sqlite.base import SqliteBase, leaving, note

#: Take the place after the user's last one; it is first when no place before it is still
#: served (a row's changes are made before its ``RETURNING`` values are read, so the new
#: place itself is left out by its number, the highest).
_TAKE = (
    "INSERT INTO lines (user_id, place, done, alive_until) VALUES (?, (SELECT "
    "COALESCE(MAX(place), -1) + 1 FROM lines WHERE user_id = ?), 0, ?) "
    "RETURNING place, NOT EXISTS (SELECT 1 FROM lines AS other WHERE other.user_id = ? "
    "AND other.done = 0 AND other.place < lines.place)"
)


class SqliteQueues(SqliteBase):
    """:class:`agent.store.QueueStore` on SQLite."""

    async def take_place(self, user_id: str, lease_until: datetime) -> Place:
        # One statement, so its own transaction (no BEGIN and COMMIT of ours: an insert
        # takes the write lock before it reads): the place after the user's last, and
        # whether it is first (no place before it still served) (:data:`_TAKE`).
        (number, first), *_ = await self.fetch_all(
            _TAKE, [user_id, user_id, lease_until.timestamp(), user_id]
        )
        return Place(user_id, number, bool(first), lease_until - utc_now())

    async def first_in_queue(self, place: Place, now: datetime) -> bool:
        await self.write(
            (
                "UPDATE lines SET done = 1 WHERE user_id = ? AND place < ? AND done = 0 "
                "AND alive_until < ?",
                [place.user_id, place.number, now.timestamp()],
            )
        )
        row = await self.fetch_one(
            "SELECT 1 FROM lines WHERE user_id = ? AND place < ? AND done = 0 LIMIT 1",
            [place.user_id, place.number],
        )
        return row is None

    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        await self.write(
            *(
                (
                    "UPDATE lines SET alive_until = ? WHERE user_id = ? AND place = ? AND done = 0",
                    [lease_until.timestamp(), user, number],
                )
                for user, number in places
            )
        )

    async def leave(self, place: Place, *, served: bool = True) -> None:
        """(``served`` is not needed here: the queue is read with one query.)"""
        if not place.left:
            await self.write(*leaving(place))
            place.left = True

    async def note_turn(self, place: Place, utt_id: str) -> None:
        await self.write(note(place, utt_id))

    async def running_turn(self, user_id: str) -> RunningTurn | None:
        row = await self.fetch_one(
            "SELECT place, utt_id FROM lines WHERE user_id = ? AND done = 0 "
            "AND alive_until >= ? ORDER BY place LIMIT 1",
            [user_id, utc_now().timestamp()],
        )
        return None if row is None else RunningTurn(int(row[0]), row[1])

    async def interrupt(self, user_id: str, number: int) -> None:
        await self.write(
            (
                "UPDATE lines SET interrupt = 1 WHERE user_id = ? AND place = ? AND done = 0",
                [user_id, number],
            )
        )

    async def interrupted(self, places: list[tuple[str, int]]) -> list[tuple[str, int]]:
        if not places:
            return []
        which = " OR ".join(["(user_id = ? AND place = ?)"] * len(places))
        args = [part for place in places for part in place]
        rows = await self.fetch_all(
            f"SELECT user_id, place FROM lines WHERE interrupt = 1 AND done = 0 AND ({which})",
            args,
        )
        return [(str(user), int(number)) for user, number in rows]
