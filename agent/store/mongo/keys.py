"""Clients' idempotency keys on MongoDB: one document per claim, ``_id`` from user and key."""

from __future__ import annotations

from datetime import UTC, datetime

from pymongo.errors import DuplicateKeyError

from agent.store.base import Claim, ClaimStatus
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import _escape, _literal, _unescape
from agent.store.mongo.errors import Doc, _unavailable_when_unreachable

#: The lease of a released claim: over long ago.
_RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


class MongoKeys(MongoBase):
    """:class:`agent.store.KeyStore` on MongoDB."""

    @staticmethod
    def _claim_id(user_id: str, key: str) -> str:
        """One ``_id`` per (user, key): the unique ``_id`` index makes a claim atomic, and
        the length prefix keeps ("a:b", "c") apart from ("a", "b:c")."""
        return f"{len(_literal(user_id))}:{user_id}:{_literal(key)}"

    @_unavailable_when_unreachable
    async def claim_key(
        self, user_id: str, key: str, fingerprint: str, lease_until: datetime, now: datetime
    ) -> Claim:
        claim_id = self._claim_id(user_id, key)
        try:
            await self._keys.insert_one(
                {
                    "_id": claim_id,
                    "user_id": user_id,
                    "reply": None,
                    "fingerprint": fingerprint,
                    "alive_until": lease_until,
                }
            )
            return Claim(ClaimStatus.CLAIMED)
        except DuplicateKeyError:
            doc = await self._keys.find_one({"_id": claim_id})
        if doc is None:  # released in between: the next try claims it
            return Claim(ClaimStatus.IN_FLIGHT)
        if doc.get("fingerprint") not in (None, fingerprint):
            return Claim(ClaimStatus.OTHER_MESSAGE)
        if doc.get("reply") is not None:
            return Claim(ClaimStatus.ANSWERED, _unescape(doc["reply"]))
        alive_until = doc.get("alive_until")
        if alive_until is not None and alive_until >= now:
            return Claim(ClaimStatus.IN_FLIGHT)
        # The claim's agent died: take it over, unless another retry just did (the lease
        # it read is part of the filter, so only one of them matches).
        taken = await self._keys.update_one(
            {"_id": claim_id, "reply": None, "alive_until": alive_until},
            {"$set": {"alive_until": lease_until, "fingerprint": fingerprint}},
        )
        return Claim(ClaimStatus.RECLAIMED if taken.matched_count else ClaimStatus.IN_FLIGHT)

    @_unavailable_when_unreachable
    async def renew_keys(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        for user_id, key in claims:  # by _id: FerretDB scans for any other filter
            await self._keys.update_one(
                {"_id": self._claim_id(user_id, key), "reply": None},
                {"$set": {"alive_until": lease_until}},
            )

    @_unavailable_when_unreachable
    async def complete_key(self, user_id: str, key: str, reply: Doc) -> None:
        await self._keys.update_one(
            {"_id": self._claim_id(user_id, key)}, {"$set": {"reply": _escape(reply)}}
        )

    @_unavailable_when_unreachable
    async def release_key(self, user_id: str, key: str) -> None:
        """The claim's lease ends now, rather than the claim going: the retry that takes it
        over knows an attempt came before it."""
        await self._keys.update_one(
            {"_id": self._claim_id(user_id, key), "reply": None},
            {"$set": {"alive_until": _RELEASED}},
        )
