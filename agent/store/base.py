"""The store's protocols, one per kind of caller, and :class:`Store`, the sum of them that
every backend implements and passes one contract test suite for.

A turn touches a bounded number of records whatever the dialog's length: it takes the
user's place in the queue, reads the user, the dialog's head and its last K utterances, writes
the human utterance before any service is called, and at the end writes the finished human
utterance, the bot utterance and the merged attributes, leaving the queue in the same
write. No record grows with the dialog (one record per utterance).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, Field

from agent.sdk.errors import ChorusError
from agent.state.models import (
    Bot,
    BotUtterance,
    Dialog,
    Human,
    HumanUtterance,
    Utterance,
    utc_now,
)
from agent.store.handoffs import HandoffStore as HandoffStore

# The parts' protocols that have modules of their own, named here too: the one place a
# caller imports the store's types from.
from agent.store.keys import DEFAULT_KEY_RETENTION as DEFAULT_KEY_RETENTION
from agent.store.keys import Claim as Claim
from agent.store.keys import ClaimStatus as ClaimStatus
from agent.store.keys import KeyStore as KeyStore
from agent.store.reader import DialogReader as DialogReader
from agent.store.retention import LifecycleStore as LifecycleStore
from agent.store.retention import Retention as Retention
from agent.store.retention import Swept as Swept


class StoreUnavailable(ChorusError):
    """The database cannot be reached, or cannot write (a full disk); the API answers 503
    with Retry-After, and the client may retry safely."""


class StoreWriteRefused(ChorusError):
    """The database refused a document for what it holds (too large, not encodable): the
    data is at fault, not the database, so retrying the same write cannot help. The storage
    bounds (:mod:`agent.state.storage_limits`) keep this from happening; a store raises it so that
    the turn can still be kept in a reduced form if it ever does."""


class PlaceLost(ChorusError):
    """A turn's end refused because the turn no longer holds its place in the user's queue:
    its agent stalled past the lease (``CHORUS_QUEUE_LEASE``), and a later message of the
    user passed the place over and may already have run on the same state. Storing the
    end then would interleave two turns and lose one's attribute update, so nothing of it
    is kept (:meth:`TurnStore.finish_turn`): the human utterance ``utt_id`` stays in the
    dialog unanswered, marked ``interrupted``, without its key, and the message can be
    sent again."""

    def __init__(self, utt_id: str) -> None:
        super().__init__(
            f"the turn of utterance {utt_id} lost its place in the user's queue before its "
            "answer was stored; nothing of the answer was kept"
        )
        self.utt_id = utt_id


def overtaken(utterance: HumanUtterance) -> HumanUtterance:
    """The human utterance of a turn whose end was refused (:class:`PlaceLost`), as the
    store keeps it: unanswered, marked interrupted, none of the services' outputs, and no
    idempotency key, so that the message sent again is answered anew (a key still on it
    would point the retry at this utterance, now followed by the turn that took over)."""
    return utterance.model_copy(
        update={
            "annotations": {},
            "hypotheses": [],
            "errors": [],
            "trace": [],
            "skill_selection": [],
            "message_key": None,
            "interrupted": True,
        }
    )


class RatingsFull(ChorusError):
    """The dialog or the bot answer already holds the most ratings kept
    (``MAX_RATINGS``): a rating is refused rather than one stored dropped."""

    def __init__(self, what: str, kept: int) -> None:
        super().__init__(
            f"{what} already holds {kept} ratings, the most kept (MAX_RATINGS); "
            "this one was not stored"
        )


@dataclass(slots=True)
class Place:
    """A message's place in its user's queue (:class:`QueueStore`)."""

    user_id: str
    number: int
    #: no earlier message of the user is unfinished: the turn may start at once
    first: bool
    #: how long the place is held without a heartbeat (the successor gets as long)
    lease: timedelta
    #: the place was given back (by :meth:`QueueStore.leave` or with a finished turn)
    left: bool = False
    #: what the store read of the user on making the place first (MongoDB: the user's
    #: document), for :meth:`TurnStore.open_turn` to start the turn from without reading
    #: it again; None when nothing was read (SQLite reads in one transaction anyway)
    seen: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RunningTurn:
    """The place being served in a user's queue, and the human utterance it answers."""

    number: int
    #: None for the moment between taking the place and storing the utterance
    utt_id: str | None


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
    #: the ``_id`` dp-agent gave the dialog, for one imported from dp-agent
    dp_agent_id: str | None = None
    #: the experiment arm whose pipeline answers it, set when it is opened
    arm: str | None = None


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What a turn starts from (:meth:`TurnStore.open_turn`)."""

    human: Human
    dialog: DialogHead
    #: the dialog's last utterances, oldest first (an unanswered human utterance left by
    #: an attempt that failed mid-turn included); read as shown, each without the fields of
    #: :data:`~agent.state.models.NOT_SHOWN`, unless the turn asked for them whole
    history: list[Utterance]
    #: the last turn's answer was stored but the rest of its end was not (the database or
    #: the agent died in between): the store completed that end just now, so the last
    #: turn is whole, and its client never got the answer
    completed_last_turn: bool = False


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """What a finished turn stores (:meth:`TurnStore.finish_turn`), in one write."""

    dialog_id: str
    #: the user's internal id (:attr:`Human.id`)
    human_id: str
    #: the human utterance, annotated: it replaces the one stored before the pipeline ran
    utterance: HumanUtterance
    answer: BotUtterance
    #: merged into the user's attributes key by key (a concurrent merge of other keys is
    #: never lost)
    human_attributes: dict[str, Any] = field(default_factory=dict)
    #: merged into the dialog's bot attributes the same way
    bot_attributes: dict[str, Any] = field(default_factory=dict)
    #: merged into the user's profile the same way
    human_profile: dict[str, Any] | None = None
    #: ``human_attributes`` become the user's whole attributes (dp-agent's reset on a
    #: dialog's first turn)
    replace_human_attributes: bool = False
    #: the place in the queue the turn leaves in the same write (one command fewer per turn on
    #: MongoDB); None: the caller leaves it (:meth:`QueueStore.leave`), or holds none
    leave: Place | None = None
    #: the place the turn holds but keeps (``leave`` is None: the dialog is closed after the
    #: answer, then the place left): the end is fenced on it all the same
    keep: Place | None = None

    @property
    def held(self) -> Place | None:
        """The place the end is fenced on (:meth:`TurnStore.finish_turn`)."""
        return self.leave if self.leave is not None else self.keep


class Restored(enum.Enum):
    """What restoring a dialog from a backup did (:meth:`RestoreStore.restore_dialog`)."""

    STORED = "stored"
    #: stored, but closed: the user has another open dialog in this store
    STORED_CLOSED = "stored_closed"
    PRESENT = "present"  #: a dialog with that id was stored already: left as it is


def restored_head(dialog: Dialog, human_id: str, *, closed: bool) -> DialogHead:
    """The head of a dialog read from a backup, as a store keeps it; ``closed``: it was open
    but is stored closed (the user has another open dialog), so it gets its end now."""
    head = DialogHead(**dialog.model_dump(exclude={"human", "utterances"}), human_id=human_id)
    if closed and head.date_finish is None:
        head.date_finish = utc_now()
    return head


class TurnStore(Protocol):
    """What the message flow writes and reads in a turn: its start, its human utterance, its
    end, and closing the open dialog (:mod:`agent.flow`)."""

    async def open_turn(
        self,
        user_id: str,
        channel_type: str,
        limit: int,
        arm: str | None = None,
        *,
        seen: Mapping[str, Any] | None = None,
        whole: bool = True,
    ) -> TurnStart:
        """The user (created on first contact), the open dialog (opened when there is
        none, on experiment arm ``arm``) and its last ``limit`` utterances, read together.
        ``seen``: the user as taking the place in the queue read them (:attr:`Place.seen`),
        used instead of reading them again. ``whole`` False: the utterances are read as shown,
        without the fields of :data:`~agent.state.models.NOT_SHOWN` (left at their
        defaults), which a Chorus pipeline's services are never shown of a past utterance;
        :meth:`utterances` reads them whole again."""
        ...

    async def utterances(self, utt_ids: Sequence[str]) -> list[Utterance]:
        """The utterances of these ids, whole, in the order asked (an id not stored is
        left out): a turn read as shown that turns out to answer a message again
        (:func:`agent.flow.stored_turn`) reads its stored turn so."""
        ...

    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        """The human utterance stored with ``message_key`` ``key`` and the utterance after
        it, if any (empty: none is stored): where an unfinished attempt of a keyed message
        left it. Only read when an attempt did not finish (:attr:`ClaimStatus.RECLAIMED`),
        so it may cost a scan of the dialog."""
        ...

    async def last_closed_dialog(self, user_id: str) -> str | None:
        """The id of the user's dialog closed last, or None: where a keyed message that
        closed its dialog (``close_after``) is stored, when its client's retry comes after
        the close and before its key recorded the answer. Only read then."""
        ...

    async def add_utterance(
        self, dialog_id: str, utterance: HumanUtterance, place: Place | None = None
    ) -> None:
        """Store the human utterance before the pipeline runs. A store may give the
        utterance its id here (``utterance.utt_id`` is then rewritten). With ``place``,
        the turn's place in the user's queue is noted as answering it in the same write,
        as :meth:`QueueStore.note_turn` notes it."""
        ...

    async def finish_turn(self, end: TurnEnd, *, retrying: bool = False) -> None:
        """Store the turn's end (:class:`TurnEnd`): replace the human utterance with its
        annotated version, append the bot's, merge the attribute changes, and leave
        :attr:`TurnEnd.leave` in the same write (marking it :attr:`Place.left`). A store
        may give the bot utterance its id here. ``retrying``: an earlier call for this turn
        raised :class:`StoreUnavailable`, so part of it may be stored: what is stored is
        completed, nothing is written twice.

        Fenced: the end is stored only while the turn still holds :attr:`TurnEnd.held`
        (on SQLite checked in the same transaction; on MongoDB in the same single-document
        update as the attribute merges). A place passed over for a lapsed lease raises
        :class:`PlaceLost` with nothing of the end kept: the human utterance is stored as
        :func:`overtaken` says. (On MongoDB the answer, written first, is then deleted
        again, unless the turn that took over already found it and completed its end,
        building on it: then the turn stands and nothing is raised.)"""
        ...

    async def mark_interrupted(self, utt_id: str) -> None:
        """Mark a stored human utterance ``interrupted``: its turn was cancelled by a later
        message of the user, so it stays in the dialog without an answer."""
        ...

    async def close_active_dialog(self, user_id: str) -> str | None:
        """End the user's open dialog; its id, or None when there was none."""
        ...


class RatingStore(Protocol):
    """Ratings of dialogs and bot answers: the rating routes, and a reward sent with the
    user's next message (:mod:`agent.api.routes.ratings`, :mod:`agent.flow`)."""

    async def add_dialog_rating(
        self,
        dialog_id: str,
        entry: dict[str, Any],
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        """Append ``entry`` to the dialog's ``attributes.ratings`` (dp-agent's stored form
        of a rating) and set Chorus's numeric ``rating`` when given, in one write; False
        when there is no such dialog, or, with ``user_id``, when it is not that user's (a
        rating without a user id is taken, as dp-agent takes it); :class:`RatingsFull`
        when it already holds ``max_ratings`` of them (nothing is written then)."""
        ...

    async def add_utterance_rating(
        self,
        utt_id: str,
        entry: dict[str, Any] | None,
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        """Append ``entry`` to a bot utterance's ``attributes.ratings`` and set its numeric
        ``rating`` when given, in one write (``entry`` None: only the numeric rating, as a
        reward sent with the user's next message is kept; one of them is given). False
        when there is no such bot utterance, or, with ``user_id``, none in that user's
        dialogs. Another user's answer and a missing one take the same path, so the time a
        refusal takes does not tell ids apart; :class:`RatingsFull` when it already holds
        ``max_ratings`` of them."""
        ...


class RestoreStore(Protocol):
    """Storing what a backup holds (``chorus import``, :mod:`agent.backup`): whole records
    with their ids (which of them are stored already is read with
    :meth:`DialogReader.stored_dialog_ids`)."""

    async def restore_user(self, human: Human) -> bool:
        """Store a user read from a backup (``chorus import``), with their profile and
        attributes, unless a user with that user id is already stored: the stored one is
        newer and is kept as it is. True when stored. The store may give the user another
        internal ``id`` (MongoDB derives it from the user id)."""
        ...

    async def restore_dialog(self, user_id: str, dialog: Dialog, active: bool) -> Restored:
        """Store a dialog read from a backup, whole, with its utterances' ids, for the user
        with ``user_id`` (created, empty, when missing). A dialog whose id is stored already
        is left as it is (importing twice stores once). ``active``: it was the user's open
        dialog; it is stored closed when the user has another open dialog here. Atomic on
        SQLite; on MongoDB the dialog's document is written last, so a restore cut short
        is finished by running it again. An utterance id stored in another dialog (or twice
        in this one) is never overwritten: :class:`StoreWriteRefused`, with nothing of the
        dialog kept."""
        ...


class UserErasure(Protocol):
    """Erasing a user and all they left in every part of the store
    (``DELETE /api/users/{user_id}``)."""

    async def delete_user(self, user_id: str) -> bool:
        """Erase the user: profile, dialogs, utterances, queue and keys. False for an
        unknown user."""
        ...


class StoreConnection(Protocol):
    """The connection's life: whether the database answers, and closing it. Opening it
    (:func:`agent.store.open_store`) checks the schema and runs its upgrades."""

    async def ping(self) -> None:
        """Raise :class:`StoreUnavailable` when the database cannot be reached (``/ready``)."""
        ...

    async def close(self) -> None: ...


class QueueStore(Protocol):
    """The users' queues: one message of a user at a time, in arrival order
    (:mod:`agent.queues`)."""

    async def take_place(self, user_id: str, lease_until: datetime) -> Place:
        """Take the user's next place in the queue (places only grow, in arrival order), held
        until ``lease_until`` unless renewed. :attr:`Place.first` means no earlier message
        of the user is unfinished, so the turn may start without asking
        :meth:`first_in_queue`."""
        ...

    async def first_in_queue(self, place: Place, now: datetime) -> bool:
        """Whether every earlier place of the user is finished. An earlier place whose lease
        ran out before ``now`` (its agent died) is given up on the way."""
        ...

    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        """Extend the leases of the places ``(user_id, number)`` this agent holds (its
        heartbeat)."""
        ...

    async def leave(self, place: Place, *, served: bool = True) -> None:
        """Finish a place, so the user's next message can start. ``served`` says its turn
        ran (it was first in the queue); a message that gave up waiting leaves with False."""
        ...

    async def note_turn(self, place: Place, utt_id: str) -> None:
        """Record the human utterance the place being served answers: what a message
        refused or interrupting while it runs is told (docs/turns.md, a second message)."""
        ...

    async def running_turn(self, user_id: str) -> RunningTurn | None:
        """The place being served for the user and its utterance (None until
        :meth:`note_turn`), or None when no message of the user is unfinished."""
        ...

    async def interrupt(self, user_id: str, number: int) -> None:
        """Ask whichever agent serves place ``number`` to cancel its turn (a later message
        interrupts it); nothing when that place is no longer served."""
        ...

    async def interrupted(self, places: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Of the places ``(user_id, number)`` this agent serves, those asked to cancel."""
        ...


class Store(UserErasure, StoreConnection, Protocol):
    """The whole store, as :func:`agent.store.open_store` returns it and each backend
    implements it: one part per kind of caller, each of a narrow protocol, over one
    connection. The composition root (:mod:`agent.api.composition`) hands each caller the
    part it uses; erasure and the connection, which span the parts, are the store's own."""

    @property
    def turns(self) -> TurnStore: ...
    @property
    def reader(self) -> DialogReader: ...
    @property
    def ratings(self) -> RatingStore: ...
    @property
    def restore(self) -> RestoreStore: ...
    @property
    def queues(self) -> QueueStore: ...
    @property
    def keys(self) -> KeyStore: ...
    @property
    def handoffs(self) -> HandoffStore: ...
    @property
    def lifecycle(self) -> LifecycleStore: ...


#: Each part of a :class:`Store` by its attribute, with the protocol it implements: what
#: :func:`agent.telemetry.traced_store` instruments.
PARTS: dict[str, type] = {
    "turns": TurnStore,
    "reader": DialogReader,
    "ratings": RatingStore,
    "restore": RestoreStore,
    "queues": QueueStore,
    "keys": KeyStore,
    "handoffs": HandoffStore,
    "lifecycle": LifecycleStore,
}
