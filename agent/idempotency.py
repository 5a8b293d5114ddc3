"""Idempotent retries: a client's idempotency key makes a retried message cost nothing.

The key (an ``Idempotency-Key`` header, or a ``message_id`` field) is claimed in the store
before the turn runs, together with a fingerprint of the request. A retry of an answered
message gets the first answer back and stores nothing; a retry that arrives while the first
is still being processed gets :class:`KeyInFlight` (409, retry shortly); a turn that fails
gives up its claim, so the retry runs it, told that an attempt came before (it may have
stored the message, or its whole turn). The same key sent with a different message is a
client bug that would otherwise silently get the other message's answer: :class:`KeyReused`
(422). A retry of a message that an earlier attempt stored but never answered, after a later
message was answered, is :class:`KeySuperseded` (409): answering it now would put its answer
after the later one's. A claim records where its answer is stored, not a copy of it: a
retry whose answered dialog is gone since (deleted by the data lifecycle) gets
:class:`KeyForgotten` (409).

A claim carries a lease that this agent's heartbeat renews while the turn runs: when the
agent dies mid-turn, nobody gives the claim up, so once the lease runs out a retry takes it
over and runs the turn (without a lease it would be "in flight" forever).

A key is kept for ``keep_for`` seconds (``KEY_RETENTION``, a day by default): keeping them
for ever would grow the database with every keyed message. After that, the same key is a
new message.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent.leases import Heartbeat
from agent.sdk.errors import ChorusError
from agent.sdk.models import JsonDict
from agent.state.models import utc_now
from agent.store.base import DEFAULT_KEY_RETENTION, ClaimStatus, KeyStore, StoreUnavailable

#: Seconds a key and its copy of the reply are kept, from its first claim: a day, well above
#: how long clients retry and than the longest turn.
KEY_RETENTION = DEFAULT_KEY_RETENTION


def client_key(key: str) -> str:
    """The key as the client sent it: the routes prefix it with their endpoint (``chat:``,
    ``observe:``) so the two never collide, which a client never needs to see."""
    return key.split(":", 1)[1] if ":" in key else key


class KeyInFlight(ChorusError):
    """Another request with the same idempotency key is being answered right now."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the message with idempotency key {client_key(key)!r} is being answered right "
            "now; retry shortly to get its answer"
        )


class KeySuperseded(ChorusError):
    """The key's message was stored by an attempt that did not finish, and a later message
    of the user was answered since: it stays in the dialog, unanswered, and is not stored
    or answered again."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the message with idempotency key {client_key(key)!r} was stored but not "
            "answered, and a later message was answered since; it is kept unanswered. Send "
            "it again with a new key to get an answer"
        )


class KeyForgotten(ChorusError):
    """The key's message was answered, but the dialog that holds the answer is no longer
    stored: there is nothing to send again, and answering it anew would store it twice."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the message with idempotency key {client_key(key)!r} was answered, but its "
            "dialog is no longer stored; send it again with a new key to get an answer"
        )


class KeyReused(ChorusError):
    """The idempotency key was used before for a different message."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"idempotency key {client_key(key)!r} was already used for a different "
            "message; send a new key with each new message"
        )


def fingerprint(request: Any) -> str:
    """A digest of what the client asked, to tell a retry from a reused id."""
    canonical = json.dumps(
        request, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyClaim:
    """This request's hold on its idempotency key (``key`` None: an unkeyed message, which
    holds nothing). ``answered``: what the key's first answer recorded (then nothing is
    run again); ``retried``: an earlier attempt did not finish, so it may have stored the
    message, or all of its turn."""

    user_id: str
    key: str | None
    answered: JsonDict | None = None
    retried: bool = False


class IdempotencyKeys:
    """Claims on clients' idempotency keys, each kept alive by this agent's heartbeat.

    A claim answers "may this request be answered now, and was it answered already?":
    it is taken before the turn runs, checked against the request's fingerprint, and
    completed with a small record of the answer (where the flow finds it again), never
    with a copy of a route's reply."""

    def __init__(
        self, store: KeyStore, *, lease: float = 10.0, keep_for: float = KEY_RETENTION
    ) -> None:
        self._store = store
        self._keep_for = timedelta(seconds=keep_for)
        self._heartbeat: Heartbeat[tuple[str, str]] = Heartbeat(lease, self._renew, "claim")

    async def _renew(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        await self._store.renew_keys(sorted(claims), lease_until)

    async def claim(self, user_id: str, key: str | None, request: str) -> KeyClaim:
        """Claim ``key`` for the request whose :func:`fingerprint` is ``request``:
        :class:`KeyInFlight` while another request answers it, :class:`KeyReused` when it
        was claimed for another request."""
        if key is None:
            return KeyClaim(user_id, None)
        self._heartbeat.start()
        now = utc_now()
        claim = await self._store.claim_key(
            user_id,
            key,
            request,
            self._heartbeat.lease_end(),
            now,
            keep_until=now + self._keep_for,
        )
        if claim.status is ClaimStatus.ANSWERED:
            return KeyClaim(user_id, key, answered=claim.reply or {})
        if claim.status is ClaimStatus.IN_FLIGHT:
            raise KeyInFlight(key)
        if claim.status is ClaimStatus.OTHER_MESSAGE:
            raise KeyReused(key)
        return KeyClaim(user_id, key, retried=claim.status is ClaimStatus.RECLAIMED)

    @contextlib.asynccontextmanager
    async def held(self, claim: KeyClaim) -> AsyncIterator[None]:
        """Keep the claim alive while its turn runs; give it up if the turn fails, so a
        retry runs it (told it is a retry)."""
        if claim.key is None:
            yield
            return
        held = (claim.user_id, claim.key)
        self._heartbeat.held.add(held)
        try:
            yield
        except BaseException:
            # The store may be what failed: then the lease runs out and frees the claim.
            with contextlib.suppress(StoreUnavailable):
                await self._store.release_key(claim.user_id, claim.key)
            raise
        finally:
            self._heartbeat.held.discard(held)

    async def complete(self, claim: KeyClaim, record: JsonDict) -> None:
        """Record the answer to a claimed key: a retry gets ``record`` back."""
        if claim.key is not None:
            await self._store.complete_key(claim.user_id, claim.key, record)

    async def aclose(self) -> None:
        await self._heartbeat.aclose()
