"""Clients' idempotency keys in the store: a claim per key, so a retried message is answered
once (:mod:`agent.idempotency`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from agent.sdk.models import JsonDict

#: Seconds an idempotency key and its copy of the reply are kept by default (a day): far
#: beyond the minutes over which clients retry (``KEY_RETENTION``).
DEFAULT_KEY_RETENTION = 86_400.0


class ClaimStatus(enum.Enum):
    """What claiming a client's idempotency key found."""

    CLAIMED = "claimed"  #: ours to answer: nobody tried before
    #: ours to answer, after an attempt that did not finish (a dead agent's lease ran out,
    #: or its turn failed): that attempt may have stored the message, or all of its turn
    RECLAIMED = "reclaimed"
    ANSWERED = "answered"  #: answered before: the reply is in the claim
    IN_FLIGHT = "in_flight"  #: another live request is answering it right now
    OTHER_MESSAGE = "other_message"  #: the key was used for a different request


@dataclass(frozen=True, slots=True)
class Claim:
    status: ClaimStatus
    reply: JsonDict | None = None


class KeyStore(Protocol):
    """Clients' idempotency keys: a claim per key, so a retried message is answered once
    (:mod:`agent.idempotency`)."""

    async def claim_key(
        self,
        user_id: str,
        key: str,
        fingerprint: str,
        lease_until: datetime,
        now: datetime,
        keep_until: datetime | None = None,
    ) -> Claim:
        """Claim a client's idempotency key before its turn runs, until ``lease_until``. A
        claim whose lease ran out before ``now`` with no answer (or that was released) is
        taken over (:attr:`ClaimStatus.RECLAIMED`); a claim made with another
        ``fingerprint`` is :attr:`ClaimStatus.OTHER_MESSAGE`.

        The claim, and the reply once recorded, is kept until ``keep_until`` (None: for
        ever). A claim read after that counts as absent, answered or not (unless its lease
        still runs: its turn is being answered), so expiry never depends on the database
        deleting it; each store also deletes expired claims (MongoDB: a TTL index;
        SQLite: a few on each claim)."""
        ...

    async def renew_keys(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        """Extend the leases of unanswered claims ``(user_id, key)`` this agent holds."""
        ...

    async def complete_key(self, user_id: str, key: str, reply: JsonDict) -> None:
        """Remember the answer to a claimed key."""
        ...

    async def release_key(self, user_id: str, key: str) -> None:
        """Give up a claim whose turn failed, so a retry can run it (and is told it is a
        retry: :attr:`ClaimStatus.RECLAIMED`)."""
        ...
