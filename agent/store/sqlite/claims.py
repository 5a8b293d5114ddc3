"""Clients' message ids on SQLite: one row per claim, claimed by one upsert."""

from __future__ import annotations

import json
from datetime import datetime

from agent.store.base import Claim, ClaimStatus, JsonDict
from agent.store.sqlite.base import SqliteBase, _json


class SqliteClaims(SqliteBase):
    """:class:`agent.store.ClaimStore` on SQLite."""

    async def claim_message(self, external_id: str, key: str, fingerprint: str,
                            lease_until: datetime, now: datetime) -> Claim:
        (claimed,) = self._write((
            "INSERT INTO messages (user, key, fingerprint, alive_until) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (user, key) DO UPDATE SET fingerprint = excluded.fingerprint, "
            "alive_until = excluded.alive_until WHERE messages.reply IS NULL "
            "AND COALESCE(messages.alive_until, 0) < ? "
            "AND COALESCE(messages.fingerprint, excluded.fingerprint) = excluded.fingerprint "
            "RETURNING key", [external_id, key, fingerprint, lease_until.timestamp(),
                              now.timestamp()]))
        if claimed is not None:
            return Claim(ClaimStatus.CLAIMED)
        row = self._one("SELECT reply, fingerprint FROM messages WHERE user = ? AND key = ?",
                        [external_id, key])
        if row is None:  # released in between: the next try claims it
            return Claim(ClaimStatus.IN_FLIGHT)
        reply, claimed_for = row
        if claimed_for is not None and claimed_for != fingerprint:
            return Claim(ClaimStatus.OTHER_MESSAGE)
        if reply is None:
            return Claim(ClaimStatus.IN_FLIGHT)
        return Claim(ClaimStatus.ANSWERED, json.loads(reply))

    async def renew_claims(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        self._write(*(("UPDATE messages SET alive_until = ? WHERE user = ? AND key = ? "
                       "AND reply IS NULL", [lease_until.timestamp(), user, key])
                      for user, key in claims))

    async def complete_message(self, external_id: str, key: str, reply: JsonDict) -> None:
        self._write(("UPDATE messages SET reply = ? WHERE user = ? AND key = ?",
                     [_json(reply), external_id, key]))

    async def release_message(self, external_id: str, key: str) -> None:
        self._write(("DELETE FROM messages WHERE user = ? AND key = ? AND reply IS NULL",
                     [external_id, key]))
