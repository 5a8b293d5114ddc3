"""Clients' idempotency keys on SQLite: one row per claim, claimed by one upsert.

A claim expires at ``expires_at``: an expired one is claimed anew by the same upsert, and
each claim deletes a few expired rows (:data:`PURGED_PER_CLAIM`, found by an index), in
the claim's transaction. Every new row so pays for several old ones, so the table holds
the claims still kept plus a backlog that only shrinks, and no statement ever works
through more than a handful of rows.
"""

from __future__ import annotations

import json
from datetime import datetime

from agent.sdk.models import JsonDict
from agent.store.base import Claim, ClaimStatus
from agent.store.sqlite.base import SqliteBase, json_text

#: Expired claims deleted by each claim, at most.
PURGED_PER_CLAIM = 8
#: An expired claim: past ``expires_at``, and answered or its lease run out (a live turn's
#: claim is never taken from it). Written for the table's own columns or ``idempotency_keys.``.
_EXPIRED = "{t}expires_at < ? AND ({t}reply IS NOT NULL OR COALESCE({t}alive_until, 0) < ?)"


class SqliteKeys(SqliteBase):
    """:class:`agent.store.KeyStore` on SQLite."""

    async def claim_key(
        self,
        user_id: str,
        key: str,
        fingerprint: str,
        lease_until: datetime,
        now: datetime,
        keep_until: datetime | None = None,
    ) -> Claim:
        at = now.timestamp()
        # One transaction: whether an unexpired claim was there before, then the claim.
        earlier, claimed, _ = await self.write(
            (
                "SELECT 1 FROM idempotency_keys WHERE user_id = ? AND key = ? AND NOT "
                "COALESCE(" + _EXPIRED.format(t="") + ", 0)",
                [user_id, key, at, at],
            ),
            (
                "INSERT INTO idempotency_keys (user_id, key, fingerprint, alive_until, "
                "expires_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (user_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, "
                "alive_until = excluded.alive_until, reply = NULL, "
                "expires_at = excluded.expires_at WHERE (idempotency_keys.reply IS NULL "
                "AND COALESCE(idempotency_keys.alive_until, 0) < ? "
                "AND idempotency_keys.fingerprint = excluded.fingerprint) OR ("
                + _EXPIRED.format(t="idempotency_keys.")
                + ") "
                "RETURNING key",
                [
                    user_id,
                    key,
                    fingerprint,
                    lease_until.timestamp(),
                    None if keep_until is None else keep_until.timestamp(),
                    at,
                    at,
                    at,
                ],
            ),
            (
                "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM "
                "idempotency_keys WHERE " + _EXPIRED.format(t="") + " LIMIT ?)",
                [at, at, PURGED_PER_CLAIM],
            ),
        )
        if claimed is not None:
            return Claim(ClaimStatus.CLAIMED if earlier is None else ClaimStatus.RECLAIMED)
        row = await self.fetch_one(
            "SELECT reply, fingerprint FROM idempotency_keys WHERE user_id = ? AND key = ?",
            [user_id, key],
        )
        if row is None:  # released in between: the next try claims it
            return Claim(ClaimStatus.IN_FLIGHT)
        reply, claimed_for = row
        if claimed_for != fingerprint:
            return Claim(ClaimStatus.OTHER_MESSAGE)
        if reply is None:
            return Claim(ClaimStatus.IN_FLIGHT)
        return Claim(ClaimStatus.ANSWERED, json.loads(reply))

    async def renew_keys(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        await self.write(
            *(
                (
                    "UPDATE idempotency_keys SET alive_until = ? WHERE user_id = ? AND key = ? "
                    "AND reply IS NULL",
                    [lease_until.timestamp(), user, key],
                )
                for user, key in claims
            )
        )

    async def complete_key(self, user_id: str, key: str, reply: JsonDict) -> None:
        await self.write(
            (
                "UPDATE idempotency_keys SET reply = ? WHERE user_id = ? AND key = ?",
                [json_text(reply), user_id, key],
            )
        )

    async def release_key(self, user_id: str, key: str) -> None:
        """The claim's lease ends now, rather than the claim going: the retry that takes it
        over knows an attempt came before it."""
        await self.write(
            (
                "UPDATE idempotency_keys SET alive_until = 0 WHERE user_id = ? AND key = ? "
                "AND reply IS NULL",
                [user_id, key],
            )
        )
