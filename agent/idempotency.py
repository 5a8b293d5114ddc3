"""Idempotent retries: a client's message id makes a retried message cost nothing.

The id (an ``Idempotency-Key`` header, or a ``message_id`` field) is claimed in the store
before the turn runs. A retry of an answered message gets the first answer back and
stores nothing; a retry that arrives while the first is still being processed gets
:class:`MessageInFlight` (409, retry shortly); a turn that fails gives up its claim, so the
retry runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agent.store.base import JsonDict, Store


class MessageInFlight(Exception):
    """Another request with the same message id is being answered right now."""


async def answer_once(
    store: Store, user_id: str, key: str | None, answer: Callable[[], Awaitable[JsonDict]],
) -> JsonDict:
    if key is None:
        return await answer()
    claimed, reply = await store.claim_message(user_id, key)
    if not claimed:
        if reply is None:
            raise MessageInFlight(key)
        return reply
    try:
        reply = await answer()
    except BaseException:
        await store.release_message(user_id, key)
        raise
    await store.complete_message(user_id, key, reply)
    return reply
