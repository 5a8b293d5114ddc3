"""Clients' message ids on MongoDB: one document per claim, ``_id`` from user and id."""

from __future__ import annotations

from datetime import datetime

from pymongo.errors import DuplicateKeyError

from agent.store.base import Claim, ClaimStatus
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import _escape, _literal, _unescape
from agent.store.mongo.errors import Doc, _unavailable_when_unreachable


class MongoClaims(MongoBase):
    """:class:`agent.store.ClaimStore` on MongoDB."""

    @staticmethod
    def _message_id(external_id: str, key: str) -> str:
        """One ``_id`` per (user, message id): the unique ``_id`` index makes a claim
        atomic, and the length prefix keeps ("a:b", "c") apart from ("a", "b:c")."""
        return f"{len(_literal(external_id))}:{external_id}:{_literal(key)}"

    @_unavailable_when_unreachable
    async def claim_message(self, external_id: str, key: str, fingerprint: str,
                            lease_until: datetime, now: datetime) -> Claim:
        message_id = self._message_id(external_id, key)
        try:
            await self._messages.insert_one({"_id": message_id, "user": external_id,
                                             "reply": None, "fingerprint": fingerprint,
                                             "alive_until": lease_until})
            return Claim(ClaimStatus.CLAIMED)
        except DuplicateKeyError:
            doc = await self._messages.find_one({"_id": message_id})
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
        taken = await self._messages.update_one(
            {"_id": message_id, "reply": None, "alive_until": alive_until},
            {"$set": {"alive_until": lease_until, "fingerprint": fingerprint}})
        return Claim(ClaimStatus.CLAIMED if taken.matched_count else ClaimStatus.IN_FLIGHT)

    @_unavailable_when_unreachable
    async def renew_claims(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        for user, key in claims:  # by _id: FerretDB scans for any other filter
            await self._messages.update_one(
                {"_id": self._message_id(user, key), "reply": None},
                {"$set": {"alive_until": lease_until}})

    @_unavailable_when_unreachable
    async def complete_message(self, external_id: str, key: str, reply: Doc) -> None:
        await self._messages.update_one({"_id": self._message_id(external_id, key)},
                                        {"$set": {"reply": _escape(reply)}})

    @_unavailable_when_unreachable
    async def release_message(self, external_id: str, key: str) -> None:
        await self._messages.delete_one({"_id": self._message_id(external_id, key),
                                         "reply": None})
