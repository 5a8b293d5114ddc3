"""Clients' idempotency keys on MongoDB: one document per claim, ``_id`` from user and key.

A claim expires at ``expires_at``, where a TTL index has MongoDB delete it (within a minute
or so). The index is a help, not the rule: FerretDB 1.x has no TTL indexes, and MongoDB's
monitor runs late, so a claim read past its expiry counts as absent and is claimed anew.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pymongo.errors import DuplicateKeyError

from agent.store.base import Claim, ClaimStatus
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import escape, literal, unescape
from agent.store.mongo.errors import Doc, unavailable_when_unreachable

#: The lease of a released claim: over long ago.
_RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


def _expired_filter(now: datetime) -> Doc:
    """:func:`_expired` as a filter."""
    return {
        "expires_at": {"$lt": now},
        "$or": [{"reply": {"$ne": None}}, {"alive_until": None}, {"alive_until": {"$lt": now}}],
    }


def _expired(doc: Doc, now: datetime) -> bool:
    """Past its expiry, and answered or its lease run out (a live turn keeps its claim)."""
    expires_at, alive_until = doc.get("expires_at"), doc.get("alive_until")
    if expires_at is None or expires_at >= now:
        return False
    return doc.get("reply") is not None or alive_until is None or alive_until < now


class MongoKeys(MongoBase):
    """:class:`agent.store.KeyStore` on MongoDB."""

    @staticmethod
    def _claim_id(user_id: str, key: str) -> str:
        """One ``_id`` per (user, key): the unique ``_id`` index makes a claim atomic, and
        the length prefix keeps ("a:b", "c") apart from ("a", "b:c")."""
        return f"{len(literal(user_id))}:{user_id}:{literal(key)}"

    @unavailable_when_unreachable
    async def claim_key(
        self,
        user_id: str,
        key: str,
        fingerprint: str,
        lease_until: datetime,
        now: datetime,
        keep_until: datetime | None = None,
    ) -> Claim:
        claim_id = self._claim_id(user_id, key)
        claim = {
            "_id": claim_id,
            "user_id": user_id,
            "reply": None,
            "fingerprint": fingerprint,
            "alive_until": lease_until,
            "expires_at": keep_until,
        }
        try:
            await self._keys.insert_one(claim)
            return Claim(ClaimStatus.CLAIMED)
        except DuplicateKeyError:
            doc = await self._keys.find_one({"_id": claim_id})
        if doc is None:  # released in between: the next try claims it
            return Claim(ClaimStatus.IN_FLIGHT)
        if _expired(doc, now):
            # As if it were gone: claimed anew, unless another retry just did (the filter
            # says "still expired", which a fresh claim is not, so only one matches).
            renewed = await self._keys.replace_one({"_id": claim_id, **_expired_filter(now)}, claim)
            return Claim(ClaimStatus.CLAIMED if renewed.matched_count else ClaimStatus.IN_FLIGHT)
        if doc.get("fingerprint") != fingerprint:
            return Claim(ClaimStatus.OTHER_MESSAGE)
        if doc.get("reply") is not None:
            return Claim(ClaimStatus.ANSWERED, unescape(doc["reply"]))
        alive_until = doc.get("alive_until")
        if alive_until is not None and alive_until >= now:
            return Claim(ClaimStatus.IN_FLIGHT)
        # The claim's agent died: take it over, unless another retry just did (the lease
        # it read is part of the filter, so only one of them matches).
        taken = await self._keys.update_one(
            {"_id": claim_id, "reply": None, "alive_until": alive_until},
            {"$set": {"alive_until": lease_until}},
        )
        return Claim(ClaimStatus.RECLAIMED if taken.matched_count else ClaimStatus.IN_FLIGHT)

    @unavailable_when_unreachable
    async def renew_keys(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        for user_id, key in claims:  # by _id: FerretDB scans for any other filter
            await self._keys.update_one(
                {"_id": self._claim_id(user_id, key), "reply": None},
                {"$set": {"alive_until": lease_until}},
            )

    @unavailable_when_unreachable
    async def complete_key(self, user_id: str, key: str, reply: Doc) -> None:
        await self._keys.update_one(
            {"_id": self._claim_id(user_id, key)}, {"$set": {"reply": escape(reply)}}
        )

    @unavailable_when_unreachable
    async def release_key(self, user_id: str, key: str) -> None:
        """The claim's lease ends now, rather than the claim going: the retry that takes it
        over knows an attempt came before it."""
        await self._keys.update_one(
            {"_id": self._claim_id(user_id, key), "reply": None},
            {"$set": {"alive_until": _RELEASED}},
        )
