"""The store protocol every backend implements, and passes one contract test suite for.

A turn touches a bounded number of records whatever the dialog's length: it reads the
dialog's head and its last K utterances, writes the human utterance before any service is
called, and at the end writes the finished human utterance, the bot utterance and the
merged attributes. No record grows with the dialog (one record per utterance).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from agent.state.models import Bot, BotUtterance, Dialog, Human, HumanUtterance, Utterance

JsonDict = dict[str, Any]


class StoreUnavailable(Exception):
    """The database cannot be reached, or cannot write (a full disk); the API answers 503
    with Retry-After, and the client may retry safely."""


class StoreWriteRefused(Exception):
    """The database refused a document for what it holds (too large, not encodable): the
    data is at fault, not the database, so retrying the same write cannot help. The storage
    bounds (:mod:`agent.state.limits`) keep this from happening; a store raises it so that
    the turn can still be kept in a reduced form if it ever does."""


class ClaimStatus(enum.Enum):
    """What claiming a client's message id found."""

    CLAIMED = "claimed"  #: ours to answer (new, or taken over from a dead agent's lease)
    ANSWERED = "answered"  #: answered before: the reply is in the claim
    IN_FLIGHT = "in_flight"  #: another live request is answering it right now
    OTHER_MESSAGE = "other_message"  #: the id was used for a different request


@dataclass(frozen=True, slots=True)
class Claim:
    status: ClaimStatus
    reply: JsonDict | None = None


class DialogHead(BaseModel):
    """A dialog without its utterances: what a turn needs to know about it."""

    dialog_id: str
    channel_type: str
    date_start: datetime
    date_finish: datetime | None = None
    rating: float | None = None
    human_id: str
    bot: Bot
    attributes: dict[str, Any] = Field(default_factory=dict)


class DialogStore(Protocol):
    """The dialogs: the operations of a turn and of the read API, erasure and the
    connection's life."""

    async def open_turn(self, external_id: str, channel_type: str,
                        limit: int) -> tuple[Human, DialogHead, list[Utterance]]:
        """What a turn starts from: :meth:`human`, :meth:`active_dialog` and
        :meth:`recent_utterances` at once, so a store can read each document once."""
        ...

    async def human(self, external_id: str) -> Human:
        """The user with that external id, created on first contact."""
        ...

    async def active_dialog(self, human: Human, channel_type: str) -> DialogHead:
        """The user's open dialog, or a new one."""
        ...

    async def recent_utterances(self, dialog_id: str, limit: int) -> list[Utterance]:
        """The last ``limit`` utterances, oldest first."""
        ...

    async def add_utterance(self, dialog_id: str, utterance: HumanUtterance) -> None:
        """Store the human utterance before the pipeline runs."""
        ...

    async def finish_turn(
        self, dialog_id: str, human_id: str, utterance: HumanUtterance,
        bot_utterance: BotUtterance, human_attributes: dict[str, Any],
        bot_attributes: dict[str, Any], *, human_profile: dict[str, Any] | None = None,
        replace_human_attributes: bool = False,
    ) -> None:
        """Replace the human utterance with its annotated version, append the bot's, and
        merge the chosen hypothesis' attributes key by key (a concurrent merge of other
        keys is never lost). ``human_profile`` is merged into the profile the same way;
        ``replace_human_attributes`` makes ``human_attributes`` the user's whole attributes
        (dp-agent's reset on a dialog's first turn)."""
        ...

    async def close_active_dialog(self, external_id: str) -> str | None:
        """End the user's open dialog; its id, or None when there was none."""
        ...

    async def dialog(self, dialog_id: str) -> Dialog | None:
        """The whole dialog, for reading."""
        ...

    async def user_dialogs(self, external_id: str) -> list[Dialog] | None:
        """All dialogs of a user, oldest first; None for an unknown user."""
        ...

    async def rate_dialog(self, external_id: str, dialog_id: str, rating: float) -> bool:
        """False when the user has no such dialog."""
        ...

    async def rate_utterance(self, external_id: str, utt_id: str, rating: float) -> bool:
        """Rate a bot utterance of one of the user's dialogs; False when there is none."""
        ...

    async def delete_user(self, external_id: str) -> bool:
        """Erase the user: profile, dialogs and utterances. False for an unknown user."""
        ...

    async def ping(self) -> None:
        """Raise :class:`StoreUnavailable` when the database cannot be reached."""
        ...

    async def close(self) -> None: ...


class ClaimStore(Protocol):
    """Clients' message ids: a claim per id, so a retried message is answered once
    (:mod:`agent.idempotency`)."""

    async def claim_message(self, external_id: str, key: str, fingerprint: str,
                            lease_until: datetime, now: datetime) -> Claim:
        """Claim a client's message id before its turn runs, until ``lease_until``. A claim
        whose lease ran out before ``now`` with no answer is taken over; a claim made with
        another ``fingerprint`` is :attr:`ClaimStatus.OTHER_MESSAGE` (claims stored before
        fingerprints existed match any)."""
        ...

    async def renew_claims(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        """Extend the leases of unanswered claims ``(external_id, key)`` this agent holds."""
        ...

    async def complete_message(self, external_id: str, key: str, reply: JsonDict) -> None:
        """Remember the answer to a claimed message id."""
        ...

    async def release_message(self, external_id: str, key: str) -> None:
        """Give up a claim whose turn failed, so a retry can run it."""
        ...


class LineStore(Protocol):
    """The users' line: one message of a user at a time, in arrival order
    (:mod:`agent.ordering`)."""

    async def enqueue(self, external_id: str, lease_until: datetime) -> tuple[int, bool]:
        """Take the user's next place in line (places only grow, in arrival order). Returns
        ``(place, first)``; ``first`` means no earlier message of the user is unfinished, so
        the turn may start without asking :meth:`first_in_line`."""
        ...

    async def first_in_line(self, external_id: str, place: int, now: datetime) -> bool:
        """Whether every earlier place of the user is finished. An earlier place whose lease
        ran out before ``now`` (its agent died) is given up on the way."""
        ...

    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        """Extend the leases of unfinished places this agent holds (its heartbeat)."""
        ...

    async def leave(self, external_id: str, place: int, *, served: bool = True) -> None:
        """Finish a place, so the user's next message can start. ``served`` says its turn
        ran (it was first in line); a message that gave up waiting leaves with False."""
        ...


class Store(DialogStore, ClaimStore, LineStore, Protocol):
    """All three, as one object: what :func:`agent.store.open_store` returns and each
    backend implements. Callers that need one job take the narrow protocol."""
