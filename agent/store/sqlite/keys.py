"""Clients' idempotency keys on SQLite: one row per claim, claimed by one upsert."""

from __future__ import annotations

import json
from datetime import datetime

from agent.sdk.models import JsonDict
from agent.store.base import Claim, ClaimStatus
from agent.store.sqlite.base import SqliteBase, _json


class SqliteKeys(SqliteBase):
    """:class:`agent.store.KeyStore` on SQLite."""

    async def claim_key(
        self, user_id: str, key: str, fingerprint: str, lease_until: datetime, now: datetime
    ) -> Claim:
        # One transaction: whether a claim was there before, then the claim.
        earlier, claimed = self._write(
            ("SELECT 1 FROM idempotency_keys WHERE user_id = ? AND key = ?", [user_id, key]),
            (
                "INSERT INTO idempotency_keys (user_id, key, fingerprint, alive_until) "
                "VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, "
                "alive_until = excluded.alive_until WHERE idempotency_keys.reply IS NULL "
                "AND COALESCE(idempotency_keys.alive_until, 0) < ? "
                "AND COALESCE(idempotency_keys.fingerprint, excluded.fingerprint) "
                "= excluded.fingerprint "
                "RETURNING key",
                [user_id, key, fingerprint, lease_until.timestamp(), now.timestamp()],
            ),
        )
        if claimed is not None:
            return Claim(ClaimStatus.CLAIMED if earlier is None else ClaimStatus.RECLAIMED)
        row = self._one(
            "SELECT reply, fingerprint FROM idempotency_keys WHERE user_id = ? AND key = ?",
            [user_id, key],
        )
        if row is None:  # released in between: the next try claims it
            return Claim(ClaimStatus.IN_FLIGHT)
        reply, claimed_for = row
        if claimed_for is not None and claimed_for != fingerprint:
            return Claim(ClaimStatus.OTHER_MESSAGE)
        if reply is None:
            return Claim(ClaimStatus.IN_FLIGHT)
        return Claim(ClaimStatus.ANSWERED, json.loads(reply))

    async def renew_keys(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        self._write(
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
        self._write(
            (
                "UPDATE idempotency_keys SET reply = ? WHERE user_id = ? AND key = ?",
                [_json(reply), user_id, key],
            )
        )

    async def release_key(self, user_id: str, key: str) -> None:
        """The claim's lease ends now, rather than the claim going: the retry that takes it
        over knows an attempt came before it."""
        self._write(
            (
                "UPDATE idempotency_keys SET alive_until = 0 WHERE user_id = ? AND key = ? "
                "AND reply IS NULL",
                [user_id, key],
            )
        )
