"""The MongoDB store: PyMongo's async API, one document per user, dialog and utterance.

Why it looks the way it does:

* **Bounded turns.** A turn reads the dialog's document and its last K utterances (an
  indexed ``(dialog_id, seq)`` range, newest first, ``limit K``) and writes a fixed number
  of documents. The dialog document holds a counter, never the utterances, so no document
  grows with the dialog (MongoDB refuses documents over 16 MB).
* **No lost updates without transactions.** Every write that can race is one atomic
  single-document operation, and attributes are merged key by key with
  ``$set: {"attributes.<key>": value}``, so two turns merging different keys both survive.
  Inside a turn, an utterance's ``seq`` is the dialog's counter as the turn read it (the
  user's line runs one turn of a dialog at a time), raised with ``$max`` in the same
  update that names the utterance in the ring and merges the bot's attributes; outside a
  turn, or when the unique ``(dialog_id, seq)`` index finds the number taken, it comes
  from ``$inc`` (never "read the max, then insert"). Nothing relies on multi-document
  transactions, which FerretDB does not have.
* **Few round trips.** A steady-state turn sends 12 commands (counted by
  ``tests/api/test_turn_commands.py``): the line (find, insert; then one ``update`` that
  leaves the place and raises the hint, and a delete of an old place), the user, the
  dialog and the window (three finds), the human utterance (the dialog's update, the
  insert), and the turn's end (the dialog's update, one ``update`` command holding the
  annotated human utterance and the bot's answer as an insert-only upsert, the user's
  attribute merges).
* **Point reads on the hot path.** A user document's ``_id`` is derived from the client's
  ``user_id`` (:func:`_human_id_for`), and it holds the id of the user's open dialog
  (``active_dialog``), so a turn finds the user and the dialog by ``_id``: the cheapest read
  on MongoDB, and the only one FerretDB 1.x answers from an index (it scans the whole
  collection for any other filter).
* **One open dialog per user** is a plain unique index on ``active_key``: ``"h:<human id>"``
  while the dialog is open, ``"d:<dialog id>"`` once closed. The user's ``active_dialog``
  is only a pointer to it: a pointer that is missing or names a closed dialog (an agent
  that died between the two writes) is repaired from the index the next time. The
  obvious partial unique index (``{human_id: 1}`` where ``active: true``) is refused by
  FerretDB 1.x ("Index option partialFilterExpression is not implemented yet") and
  ``sparse`` is silently ignored there, while an upsert on ``{human_id, active: true}``
  alone is not atomic (two racing upserts can both insert, on MongoDB too). A unique key
  that is always present works everywhere.
* **Free-form JSON is stored losslessly.** Annotations and attributes come from services;
  keys containing ``.``, a leading ``$`` or NUL cannot be stored as BSON field names
  (FerretDB refuses them, MongoDB restricts them), so every key is escaped on the way in
  (``%`` → ``%25``, ``.`` → ``%2E``, leading ``$`` → ``%24``, NUL → ``%00``, and whitespace at
  either end of a key, which FerretDB refuses in update paths) and unescaped on the way
  out. Our own field names contain none of those, so they are stored as they are.
  A list directly inside a list is stored as ``{"%a": [...]}`` (FerretDB 1.x refuses nested
  arrays; MongoDB reads either form back, so data written before this is read as it was).
* **Dates are BSON dates**: documents are built with ``model_dump()`` in Python mode, and
  the client is ``tz_aware`` so they read back as aware UTC datetimes.
* **FerretDB 1.x** (the tests' server) executes an update as "find, change in Go, write
  the whole document back" with nothing in between, so two updates of one document on two
  connections can lose one of them (``$inc`` included). When :meth:`MongoStore.open` finds
  FerretDB (``buildInfo`` has ``ferretdbVersion``) it keeps one connection, so this
  process's commands run one at a time and each is atomic again; utterance numbers are
  also guarded by the unique ``(dialog_id, seq)`` index and retried. Across replicas,
  turns of one user never overlap (the user's line, below, is built from inserts only), so
  their updates of the user's documents cannot interleave; MongoDB has none of this.
* **Unreachable database → :class:`StoreUnavailable`** from every method (the API answers
  503), with a short server-selection timeout so a request fails fast instead of hanging.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from bson.errors import InvalidDocument
from pydantic import TypeAdapter
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    ConnectionFailure,
    DocumentTooLarge,
    DuplicateKeyError,
    WriteError,
)
from pymongo.monitoring import CommandListener

from agent.state.models import (
    Bot,
    BotUtterance,
    Dialog,
    Human,
    HumanUtterance,
    Utterance,
    new_id,
    utc_now,
)
from agent.store.base import (
    Claim,
    ClaimStatus,
    DialogHead,
    StoreUnavailable,
    StoreWriteRefused,
)

log = logging.getLogger("chorus.store")

Doc = dict[str, Any]
P = ParamSpec("P")
R = TypeVar("R")

_utterance: TypeAdapter[Utterance] = TypeAdapter(Utterance)

#: Database used when the URL names none (``mongodb://host:27017``).
DEFAULT_DATABASE = "chorus"
#: Milliseconds to find a server / open a connection before a call fails with 503.
DEFAULT_TIMEOUT_MS = 3000
#: Slots of the ring of newest utterance ids in a dialog document: the widest window a
#: service can ask for (``context_window`` ≤ 100), so the document stays small however long
#: the dialog (FerretDB 1.x ignores ``$push``'s ``$slice``, so a list could not be capped).
RECENT_IDS = 100
#: When a served place leaves, the place this far below it is deleted: the line keeps a
#: few documents per user, yet a message would have to read a stale newest place across
#: that many whole turns of the same user to take a number twice.
_QUEUE_KEPT = 8
#: Attempts of a compare-and-set loop before giving up (each failure means another
#: writer made progress, so this is only reached under pathological contention).
_ATTEMPTS = 10
#: Utterance numbers kept between a turn's reads and writes; more means turns that failed
#: in between, whose numbers are dropped (a turn without one asks the dialog for one).
_NEXT_SEQS_KEPT = 4096
#: Users whose last served place this process remembers (one number each).
_SERVED_KEPT = 65536


def _unavailable_when_unreachable(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Turn PyMongo's connection failures (server selection timeout, lost connection,
    network timeout: all :class:`ConnectionFailure`) into :class:`StoreUnavailable`, and a
    document refused for its content (over 16 MB, not encodable as BSON, a write error
    other than a duplicate key) into :class:`StoreWriteRefused`, so callers handle one
    exception per outcome whatever the backend."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except ConnectionFailure as exc:
            raise StoreUnavailable(f"MongoDB store: {exc}") from exc
        except DuplicateKeyError:
            raise
        except (DocumentTooLarge, InvalidDocument, OverflowError, WriteError) as exc:
            raise StoreWriteRefused(f"MongoDB store: {exc}") from exc

    return wrapper


def _literal(value: str) -> str:
    """A value about to go into a query filter must be a string: a dict such as
    ``{"$ne": None}`` would be read as an operator. Types say so already; this makes it
    true at run time too, whoever the caller is."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string id, got {type(value).__name__}")
    return value


# -- key escaping ---------------------------------------------------------------------


_ESCAPED_ANYWHERE = re.compile(r"[%.\x00]")
_ESCAPE_SEQUENCE = re.compile(r"%u([0-9A-F]{4})|%([0-9A-F]{2})")


def _percent(char: str) -> str:
    code = ord(char)
    return f"%{code:02X}" if code < 256 else f"%u{code:04X}"


def _escape_key(key: str) -> str:
    """``%``, ``.`` and NUL anywhere, a leading ``$``, and whitespace at either end (which
    FerretDB 1.x refuses in an update path) become ``%XX`` / ``%uXXXX``."""
    if key.isidentifier():  # most keys: nothing to escape
        return key
    key = _ESCAPED_ANYWHERE.sub(lambda match: _percent(match.group()), key)
    if key.startswith("$"):
        key = "%24" + key[1:]
    if key != key.strip():
        start, end = len(key) - len(key.lstrip()), len(key.rstrip())
        if end == 0:  # whitespace only
            return "".join(map(_percent, key))
        key = ("".join(map(_percent, key[:start])) + key[start:end]
               + "".join(map(_percent, key[end:])))
    return key


def _unescape_key(key: str) -> str:
    if "%" not in key:
        return key
    return _ESCAPE_SEQUENCE.sub(
        lambda match: chr(int(match.group(1) or match.group(2), 16)), key)


#: The one key of the object that wraps a list directly inside a list (FerretDB 1.x refuses
#: nested arrays). No escaped key can be this: an escaped ``%`` is always ``%25``.
_LIST_IN_LIST = "%a"


def _escape(value: Any, in_list: bool = False) -> Any:
    """The value with every mapping key made storable, and every list that sits directly
    in a list wrapped (see the module docstring)."""
    if isinstance(value, Mapping):
        return {_escape_key(str(k)): _escape(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_escape(v, True) for v in value]
        return {_LIST_IN_LIST: items} if in_list else items
    return value


def _unescape(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _LIST_IN_LIST in value:
            return [_unescape(v) for v in value[_LIST_IN_LIST]]
        return {_unescape_key(k): _unescape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    return value


def _merge(prefix: str, updates: Mapping[str, Any]) -> Doc:
    """``$set`` paths that merge ``updates`` into the sub-document at ``prefix`` key by
    key: each key is its own atomic field update, so concurrent merges of other keys
    survive. Keys were checked upstream (non-empty, no '.'); escaping keeps it so."""
    return {f"{prefix}.{_escape_key(key)}": _escape(value) for key, value in updates.items()}


# -- documents ↔ models ---------------------------------------------------------------


#: Namespace of the user ids derived from the client's ``user_id``.
_USER_IDS = uuid.UUID("5b0d8c52-8a4f-4c1e-9a57-1f3e6d2c9b70")


def _human_id_for(external_id: str) -> str:
    """The user document's ``_id``: a fixed function of the client's ``user_id``, so the
    user is found by ``_id`` (see the module docstring), in the shape of every other id."""
    return uuid.uuid5(_USER_IDS, _literal(external_id)).hex


def _human_doc(human: Human) -> Doc:
    doc: Doc = _escape(human.model_dump())
    doc["_id"] = doc.pop("id")
    return doc


def _human(doc: Doc) -> Human:
    doc = _unescape(doc)
    doc["id"] = doc.pop("_id")
    return Human.model_validate(doc)


def _active_key(human_id: str) -> str:
    return "h:" + human_id


def _closed_key(dialog_id: str) -> str:
    return "d:" + dialog_id


def _dialog_doc(head: DialogHead) -> Doc:
    doc: Doc = _escape(head.model_dump())
    doc["_id"] = doc.pop("dialog_id")
    # opened_ns orders dialogs opened within the same millisecond (BSON dates keep ms).
    doc.update(active=True, active_key=_active_key(head.human_id), utterance_count=0,
               recent_ids={}, opened_ns=time.time_ns())
    return doc


def _head(doc: Doc) -> DialogHead:
    doc = _unescape(doc)
    doc["dialog_id"] = doc.pop("_id")
    return DialogHead.model_validate(doc)  # active, active_key, counters, ids: ignored


def _utterance_body(utterance: HumanUtterance | BotUtterance) -> Doc:
    """The utterance's fields as stored; its id is the document's ``_id``."""
    doc: Doc = _escape(utterance.model_dump(exclude={"utt_id"}))
    return doc


def _utterance_from(doc: Doc) -> Utterance:
    doc = _unescape(doc)
    doc["utt_id"] = doc.pop("_id")
    del doc["dialog_id"], doc["seq"]
    return _utterance.validate_python(doc)


@_unavailable_when_unreachable
async def _is_ferretdb(client: AsyncMongoClient[Doc]) -> bool:
    info = await client.admin.command("buildInfo")
    return "ferretdbVersion" in info


class MongoStore:
    """:class:`agent.store.Store` on MongoDB (or a wire-compatible server such as FerretDB)."""

    def __init__(self, client: AsyncMongoClient[Doc], db: AsyncDatabase[Doc], *,
                 point_reads: bool = False) -> None:
        self._client = client
        self._db = db
        self._point_reads = point_reads
        self._users: AsyncCollection[Doc] = db["users"]
        self._dialogs: AsyncCollection[Doc] = db["dialogs"]
        self._utterances: AsyncCollection[Doc] = db["utterances"]
        self._messages: AsyncCollection[Doc] = db["messages"]
        self._queue: AsyncCollection[Doc] = db["turn_queue"]
        #: dialog id → the next utterance number, read by this turn (see _write_seq)
        self._next_seqs: dict[str, int] = {}
        #: user → the newest place of theirs this process served and saw leave
        self._served: dict[str, int] = {}

    @classmethod
    async def open(
        cls, url: str, *, event_listeners: Sequence[CommandListener] = (),
    ) -> MongoStore:
        """Connect and create the indexes (idempotent: creating an existing index with the
        same spec is a no-op). ``event_listeners`` lets tests count the commands sent."""
        options: dict[str, Any] = {
            "tz_aware": True, "tzinfo": UTC, "appname": "chorus",
            "event_listeners": list(event_listeners),
        }
        lowered = url.lower()
        # The URL's own timeouts win; ours only keep a down database from hanging a turn.
        if "serverselectiontimeoutms" not in lowered:
            options["serverSelectionTimeoutMS"] = DEFAULT_TIMEOUT_MS
        if "connecttimeoutms" not in lowered:
            options["connectTimeoutMS"] = DEFAULT_TIMEOUT_MS
        client: AsyncMongoClient[Doc] = AsyncMongoClient(url, **options)
        try:
            ferretdb = await _is_ferretdb(client)
            if ferretdb:
                log.info("FerretDB found: one connection, so its non-atomic updates cannot "
                         "interleave, and utterances read by _id")
                await client.close()
                client = AsyncMongoClient(url, **{**options, "maxPoolSize": 1})
            store = cls(client, client.get_default_database(DEFAULT_DATABASE),
                        point_reads=ferretdb)
            await store._create_indexes()
        except BaseException:
            await client.close()
            raise
        return store

    @_unavailable_when_unreachable
    async def _create_indexes(self) -> None:
        await self._users.create_index([("user_external_id", ASCENDING)], unique=True,
                                       name="user_external_id")
        await self._dialogs.create_index([("active_key", ASCENDING)], unique=True,
                                         name="one_active_dialog")
        await self._dialogs.create_index([("human_id", ASCENDING), ("date_start", ASCENDING)],
                                         name="dialogs_by_human")
        await self._utterances.create_index([("dialog_id", ASCENDING), ("seq", ASCENDING)],
                                            unique=True, name="dialog_seq")
        await self._queue.create_index([("user", ASCENDING), ("place", ASCENDING)],
                                       name="places_by_user")

    async def _human_id(self, external_id: str) -> str | None:
        """The user's id if the user exists."""
        human_id = _human_id_for(external_id)
        doc = await self._users.find_one({"_id": human_id}, projection={"_id": 1})
        return None if doc is None else human_id

    # -- the turn ---------------------------------------------------------------------

    @_unavailable_when_unreachable
    async def open_turn(self, external_id: str, channel_type: str,
                        limit: int) -> tuple[Human, DialogHead, list[Utterance]]:
        """The user, the open dialog and its window from one read of each document: the
        user document names the dialog, the dialog document names the window."""
        user = await self._user_doc(external_id)
        human = _human(user)
        dialog = await self._open_dialog_doc(human.id, user.get("active_dialog"), channel_type)
        window = await self._window(dialog, limit)
        self._remember_next_seq(dialog["_id"], int(dialog.get("utterance_count", 0)))
        return human, _head(dialog), window

    def _remember_next_seq(self, dialog_id: str, seq: int) -> None:
        """Keep the dialog's next utterance number for the rest of this turn, so its writes
        need not ask the dialog document for one (see :meth:`_write_seq`)."""
        if len(self._next_seqs) >= _NEXT_SEQS_KEPT:  # turns that never finished
            self._next_seqs.clear()
        self._next_seqs[dialog_id] = seq

    @_unavailable_when_unreachable
    async def human(self, external_id: str) -> Human:
        return _human(await self._user_doc(external_id))

    async def _user_doc(self, external_id: str) -> Doc:
        """The user's document, created on first contact."""
        query = {"_id": _human_id_for(external_id)}
        doc = await self._users.find_one(query)
        if doc is None:
            # DuplicateKeyError: another turn created the user first, so read theirs.
            with contextlib.suppress(DuplicateKeyError):
                await self._users.insert_one(_human_doc(
                    Human(id=query["_id"], user_external_id=external_id)))
            doc = await self._users.find_one(query)
            if doc is None:  # pragma: no cover - users are never deleted
                raise LookupError(f"user {external_id!r} vanished while being created")
        return doc

    @_unavailable_when_unreachable
    async def active_dialog(self, human: Human, channel_type: str) -> DialogHead:
        user = await self._users.find_one({"_id": _literal(human.id)},
                                          projection={"active_dialog": 1})
        pointer = None if user is None else user.get("active_dialog")
        return _head(await self._open_dialog_doc(human.id, pointer, channel_type))

    async def _open_dialog_doc(self, human_id: str, pointer: Any, channel_type: str) -> Doc:
        """The document of the open dialog the user's pointer names, or of a new one."""
        doc = await self._if_open(pointer)
        if doc is not None:
            return doc
        for _ in range(_ATTEMPTS):
            doc = _dialog_doc(DialogHead(dialog_id=new_id(), channel_type=channel_type,
                                         date_start=utc_now(), human_id=human_id, bot=Bot()))
            try:
                await self._dialogs.insert_one(doc)
            except DuplicateKeyError:
                # An open dialog the pointer does not name (another turn opened it just
                # now, or its agent died before setting the pointer): point to it.
                found = await self._dialogs.find_one({"active_key": _active_key(human_id)})
                if found is None:  # closed in between: open one again
                    continue
                doc = found
            await self._users.update_one({"_id": human_id},
                                         {"$set": {"active_dialog": doc["_id"]}})
            return doc
        raise RuntimeError(f"could not open a dialog for user {human_id} (contention)")

    async def _if_open(self, dialog_id: Any) -> Doc | None:
        """The dialog's document if ``dialog_id`` names an open dialog."""
        if not isinstance(dialog_id, str):
            return None
        doc = await self._dialogs.find_one({"_id": dialog_id})
        return doc if doc is not None and doc.get("active") else None

    async def _pointed_dialog(self, human_id: str) -> Doc | None:
        """The open dialog the user's pointer names, or None if it names none that is
        open."""
        user = await self._users.find_one({"_id": human_id}, projection={"active_dialog": 1})
        return await self._if_open(None if user is None else user.get("active_dialog"))

    @_unavailable_when_unreachable
    async def recent_utterances(self, dialog_id: str, limit: int) -> list[Utterance]:
        dialog = await self._dialogs.find_one({"_id": _literal(dialog_id)}) if limit > 0 else None
        return await self._window(dialog or {"_id": dialog_id}, limit)

    async def _window(self, dialog: Doc, limit: int) -> list[Utterance]:
        """The dialog's last ``limit`` utterances, read by ``_id``: the dialog document
        keeps the ids of its newest utterances in a ring of :data:`RECENT_IDS` slots
        (utterance ``seq`` → slot ``seq % RECENT_IDS``), so the window is one indexed
        ``$in`` on MongoDB and point reads on FerretDB, which scans the whole collection
        for any other filter (a second per read at a few thousand utterances). A slot not
        written yet or overwritten (an interrupted insert) shows as a wrong ``seq``, and
        the window is then read by its seq range."""
        if limit <= 0:  # MongoDB reads limit 0 as "no limit"
            return []
        count = int(dialog.get("utterance_count", 0))
        ring: Doc = dialog.get("recent_ids", {})
        seqs = range(max(0, count - limit), count)
        ids = [ring[str(seq % RECENT_IDS)] for seq in seqs if str(seq % RECENT_IDS) in ring]
        if not ids:
            docs: list[Doc] = []
        elif self._point_reads:
            found = [await self._utterances.find_one({"_id": i}) for i in ids]
            docs = [doc for doc in found if doc is not None]
        else:
            docs = await self._utterances.find({"_id": {"$in": ids}}).to_list()
        docs.sort(key=lambda doc: int(doc["seq"]))
        if [doc["seq"] for doc in docs] != list(seqs):
            cursor = self._utterances.find({"dialog_id": _literal(dialog["_id"])},
                                           sort=[("seq", DESCENDING)], limit=limit)
            docs = list(reversed(await cursor.to_list()))
        return [_utterance_from(doc) for doc in docs]

    async def _next_seq(self, dialog_id: str, bot_attributes: Mapping[str, Any]) -> int:
        """Reserve the dialog's next utterance number atomically; the same single-document
        update merges the bot's attributes, so a turn's end costs one dialog write."""
        update: Doc = {"$inc": {"utterance_count": 1}}
        if bot_attributes:
            update["$set"] = _merge("bot.attributes", bot_attributes)
        # No projection: FerretDB 1.x refuses findAndModify's "fields" (NotImplemented).
        # The dialog document is small and bounded, so reading it whole costs little.
        doc = await self._dialogs.find_one_and_update(
            {"_id": _literal(dialog_id)}, update, return_document=ReturnDocument.AFTER)
        if doc is None:
            raise LookupError(f"no dialog {dialog_id!r}")
        return int(doc["utterance_count"]) - 1

    async def _insert_utterance(
        self, dialog_id: str, utterance: HumanUtterance | BotUtterance,
        bot_attributes: Mapping[str, Any],
    ) -> None:
        body = _utterance_body(utterance)
        for _ in range(_ATTEMPTS):
            seq = await self._next_seq(dialog_id, bot_attributes)
            try:
                await self._utterances.insert_one(
                    {"_id": _literal(utterance.utt_id), "dialog_id": dialog_id, "seq": seq,
                     **body})
                await self._dialogs.update_one(
                    {"_id": _literal(dialog_id)},
                    {"$set": {f"recent_ids.{seq % RECENT_IDS}": utterance.utt_id}})
                return
            except DuplicateKeyError:
                # Either the utterance is already stored (a caller's mistake: say so, as
                # SQLite does) or the number was taken (only on a server whose $inc is not
                # atomic): then take the next one, the unique index keeps order and count.
                if await self._utterances.find_one({"_id": utterance.utt_id},
                                                   projection={"_id": 1}) is not None:
                    raise
        raise RuntimeError(f"no free utterance number in dialog {dialog_id} (contention)")

    async def _write_seq(self, dialog_id: str, utterance: HumanUtterance | BotUtterance,
                         bot_attributes: Mapping[str, Any]) -> int | None:
        """Point the dialog at ``utterance`` as its next utterance, by the number this
        turn read (:meth:`open_turn`), in one update that also merges the bot's attributes;
        None when this turn read no number (a caller outside a turn).

        The user's line runs one turn of a dialog at a time, so the number read at the
        turn's start is still free; ``$max`` keeps the counter from going back if it is
        not (a caller outside the line), and the unique ``(dialog_id, seq)`` index then
        refuses the utterance's insert, which falls back to :meth:`_insert_utterance`.
        The dialog is written before the utterance, as with ``$inc``: an utterance whose
        insert was cut short leaves a slot naming nothing, which the window sees."""
        seq = self._next_seqs.pop(dialog_id, None)
        if seq is None:
            return None
        update: Doc = {"$max": {"utterance_count": seq + 1},
                       "$set": {f"recent_ids.{seq % RECENT_IDS}": _literal(utterance.utt_id),
                                **_merge("bot.attributes", bot_attributes)}}
        await self._dialogs.update_one({"_id": _literal(dialog_id)}, update)
        return seq

    async def _utterance_exists(self, utt_id: str) -> bool:
        return await self._utterances.find_one({"_id": utt_id}, projection={"_id": 1}) is not None

    @_unavailable_when_unreachable
    async def add_utterance(self, dialog_id: str, utterance: HumanUtterance) -> None:
        seq = await self._write_seq(dialog_id, utterance, {})
        if seq is not None:
            try:
                await self._utterances.insert_one(
                    {"_id": _literal(utterance.utt_id), "dialog_id": dialog_id, "seq": seq,
                     **_utterance_body(utterance)})
                self._next_seqs[dialog_id] = seq + 1
                return
            except DuplicateKeyError:
                if await self._utterance_exists(utterance.utt_id):
                    raise
                # The number was taken by a writer outside the line: take a fresh one.
        await self._insert_utterance(dialog_id, utterance, {})

    @_unavailable_when_unreachable
    async def finish_turn(
        self, dialog_id: str, human_id: str, utterance: HumanUtterance,
        bot_utterance: BotUtterance, human_attributes: dict[str, Any],
        bot_attributes: dict[str, Any], *, human_profile: dict[str, Any] | None = None,
        replace_human_attributes: bool = False,
    ) -> None:
        # $set of every field replaces the utterance's content (HumanUtterance has a fixed
        # set of fields) while keeping its dialog_id and seq, which the model does not hold.
        annotated: Doc = {"q": {"_id": _literal(utterance.utt_id)},
                          "u": {"$set": _utterance_body(utterance)}}
        seq = await self._write_seq(dialog_id, bot_utterance, bot_attributes)
        try:
            answered = seq is not None and await self._annotate_and_answer(
                dialog_id, seq, annotated, bot_utterance)
        except BaseException:
            if seq is not None:  # refused: a retry of this turn's end writes the same slot
                self._remember_next_seq(dialog_id, seq)
            raise
        if not answered:
            await self._utterances.update_one(annotated["q"], annotated["u"])
            await self._insert_utterance(dialog_id, bot_utterance, bot_attributes)
        user: Doc = {}
        if replace_human_attributes:
            user["attributes"] = _escape(human_attributes)
        elif human_attributes:
            user.update(_merge("attributes", human_attributes))
        if human_profile:
            user.update(_merge("profile", human_profile))
        if user:
            await self._users.update_one({"_id": _literal(human_id)}, {"$set": user})

    async def _annotate_and_answer(self, dialog_id: str, seq: int, annotated: Doc,
                                   bot_utterance: BotUtterance) -> bool:
        """The annotated human utterance and the bot's answer in one ``update`` command:
        the answer is an upsert that only inserts. False when its number was taken (a
        writer outside the line), after the annotation was written."""
        answer = {"q": {"_id": _literal(bot_utterance.utt_id)},
                  "u": {"$setOnInsert": {"dialog_id": dialog_id, "seq": seq,
                                         **_utterance_body(bot_utterance)}},
                  "upsert": True}
        reply, errors = await self._update(self._utterances, [annotated, answer])
        if errors:
            if [e.get("index") for e in errors] == [1] and errors[0].get("code") == 11000:
                return False
            raise WriteError(str(errors), code=errors[0].get("code"))
        if not reply.get("upserted"):  # the answer was stored before: a caller's mistake
            raise DuplicateKeyError(f"utterance {bot_utterance.utt_id} is already stored")
        return True

    async def _update(self, collection: AsyncCollection[Doc],
                      statements: list[Doc]) -> tuple[Doc, list[Doc]]:
        """Several update statements of one collection as one ordered ``update`` command,
        and the errors of those that failed (the ones after the first failure did not
        run). Sent as a command rather than with ``bulk_write``, which sends a document
        over 16 MB to FerretDB and then fails on its reply instead of refusing it."""
        reply = await self._db.command({"update": collection.name, "updates": statements,
                                        "ordered": True})
        return reply, list(reply.get("writeErrors") or [])

    # -- dialogs ------------------------------------------------------------------------

    @_unavailable_when_unreachable
    async def close_active_dialog(self, external_id: str) -> str | None:
        human_id = await self._human_id(external_id)
        if human_id is None:
            return None
        key = _active_key(human_id)
        for _ in range(_ATTEMPTS):
            doc = await self._pointed_dialog(human_id) or await self._dialogs.find_one(
                {"active_key": key}, projection={"_id": 1})
            if doc is None:
                return None
            dialog_id = str(doc["_id"])
            result = await self._dialogs.update_one(
                {"_id": dialog_id, "active_key": key},
                {"$set": {"active": False, "active_key": _closed_key(dialog_id),
                          "date_finish": utc_now()}})
            if result.matched_count:
                # A pointer left behind only costs a read: a closed dialog is not used.
                await self._users.update_one({"_id": human_id, "active_dialog": dialog_id},
                                             {"$unset": {"active_dialog": ""}})
                return dialog_id
            # Closed by someone else in between; look again (a new one may be open).
        return None

    async def _with_utterances(self, heads: list[Doc], human: Human) -> list[Dialog]:
        """Whole dialogs: all their utterances in one indexed query, grouped in order. On
        FerretDB, a dialog the ring of newest ids covers whole is read by ``_id`` instead
        (it scans every utterance of every dialog for the query)."""
        by_dialog: dict[str, list[Doc]] = {}
        if self._point_reads:
            for head in heads:
                docs = await self._utterances_by_ring(head)
                if docs is not None:
                    by_dialog[head["_id"]] = docs
        rest = [head["_id"] for head in heads if head["_id"] not in by_dialog]
        if rest:
            by_dialog.update({i: [] for i in rest})
            cursor = self._utterances.find({"dialog_id": {"$in": rest}},
                                           sort=[("dialog_id", ASCENDING), ("seq", ASCENDING)])
            async for doc in cursor:
                by_dialog[doc["dialog_id"]].append(doc)
        dialogs = []
        for doc in heads:
            dialog_head = _head(doc)
            utterances = [_utterance_from(u) for u in by_dialog[dialog_head.dialog_id]]
            dialogs.append(Dialog(**dialog_head.model_dump(exclude={"human_id"}), human=human,
                                  utterances=utterances))
        return dialogs

    async def _utterances_by_ring(self, head: Doc) -> list[Doc] | None:
        """Every utterance of a dialog short enough for its ring to name them all, read by
        ``_id``; None when the ring does not (a longer dialog, a slot never written)."""
        count = int(head.get("utterance_count", 0))
        ring: Doc = head.get("recent_ids", {})
        if count > RECENT_IDS or any(str(seq) not in ring for seq in range(count)):
            return None
        docs = [await self._utterances.find_one({"_id": ring[str(seq)]}) for seq in range(count)]
        if [None if d is None else d["seq"] for d in docs] != list(range(count)):
            return None
        return [d for d in docs if d is not None]

    @_unavailable_when_unreachable
    async def dialog(self, dialog_id: str) -> Dialog | None:
        head = await self._dialogs.find_one({"_id": _literal(dialog_id)})
        if head is None:
            return None
        user = await self._users.find_one({"_id": head["human_id"]})
        if user is None:
            return None
        (dialog,) = await self._with_utterances([head], _human(user))
        return dialog

    @_unavailable_when_unreachable
    async def user_dialogs(self, external_id: str) -> list[Dialog] | None:
        user = await self._users.find_one({"_id": _human_id_for(external_id)})
        if user is None:
            return None
        cursor = self._dialogs.find({"human_id": user["_id"]},
                                    sort=[("date_start", ASCENDING), ("opened_ns", ASCENDING)])
        heads = await cursor.to_list()
        return await self._with_utterances(heads, _human(user)) if heads else []

    @_unavailable_when_unreachable
    async def rate_dialog(self, external_id: str, dialog_id: str, rating: float) -> bool:
        human_id = await self._human_id(external_id)
        if human_id is None:
            return False
        result = await self._dialogs.update_one(
            {"_id": _literal(dialog_id), "human_id": human_id}, {"$set": {"rating": rating}})
        return result.matched_count > 0

    @_unavailable_when_unreachable
    async def rate_utterance(self, external_id: str, utt_id: str, rating: float) -> bool:
        human_id = await self._human_id(external_id)
        if human_id is None:
            return False
        utterance = await self._utterances.find_one(
            {"_id": _literal(utt_id), "speaker": "bot"}, projection={"dialog_id": 1})
        if utterance is None:
            return False
        owned = await self._dialogs.find_one(
            {"_id": utterance["dialog_id"], "human_id": human_id}, projection={"_id": 1})
        if owned is None:
            return False
        result = await self._utterances.update_one({"_id": utt_id},
                                                   {"$set": {"rating": rating}})
        return result.matched_count > 0

    # -- idempotent retries -------------------------------------------------------------

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

    # -- one message of a user at a time ------------------------------------------------
    #
    # A place is a document whose ``_id`` holds (user, place): taking one is an insert,
    # which the unique ``_id`` makes atomic on MongoDB and on FerretDB alike (no ``$inc``,
    # which FerretDB 1.x cannot make atomic across connections, i.e. across replicas).
    # Every read and write names one ``_id`` (FerretDB scans the collection for any other
    # filter: 95 ms per turn at 3,000 places):
    #
    # * The user's ``next`` document says where to try first. It is raised when a place
    #   leaves, in the same ``update`` command that marks the place done, so it is never
    #   ahead of the newest place and numbers have no gaps; when it is behind (a message
    #   still running or waiting, an agent that died), the insert finds the number taken
    #   and tries the next one.
    # * A place is done when its turn ran (``served``) or when it was given up (its
    #   message stopped waiting, or its lease ran out). A served place started only when
    #   every earlier place was done, so whether all earlier places are done is read
    #   downwards from the place just below, stopping at the first served (or deleted)
    #   one: usually a single read, and none when this process served the place just
    #   below and saw it leave (a user's messages mostly reach the same replica).
    # * A served place deletes the place ``_QUEUE_KEPT`` below it, which is done for the
    #   same reason.

    @staticmethod
    def _place_id(external_id: str, place: int) -> str:
        return f"{len(_literal(external_id))}:{external_id}:{place}"

    @staticmethod
    def _next_place_id(external_id: str) -> str:
        return f"{len(_literal(external_id))}:{external_id}:next"

    @_unavailable_when_unreachable
    async def enqueue(self, external_id: str, lease_until: datetime) -> tuple[int, bool]:
        next_id = self._next_place_id(external_id)
        hint = await self._queue.find_one({"_id": next_id})
        place = 0 if hint is None else int(hint["place"])
        while True:
            try:
                await self._queue.insert_one({
                    "_id": self._place_id(external_id, place), "user": external_id,
                    "place": place, "done": False, "served": False,
                    "alive_until": lease_until})
                break
            except DuplicateKeyError:  # taken by another message of the user
                place += 1
        if self._served.get(external_id) == place - 1:
            # This process served the place just below and saw it leave: every earlier
            # place is done, no need to read it.
            return place, True
        return place, await self._earlier_done(external_id, place, None)

    async def _earlier_done(self, external_id: str, place: int, now: datetime | None) -> bool:
        """Whether every place below ``place`` is done; with ``now``, places whose lease
        ran out before it are given up on the way."""
        for earlier in range(place - 1, -1, -1):
            doc = await self._queue.find_one({"_id": self._place_id(external_id, earlier)})
            if doc is None or doc.get("served"):
                return True
            if doc["done"]:
                continue
            if now is None or doc["alive_until"] >= now:
                return False
            await self._queue.update_one({"_id": doc["_id"]}, {"$set": {"done": True}})
        return True

    @_unavailable_when_unreachable
    async def first_in_line(self, external_id: str, place: int, now: datetime) -> bool:
        return await self._earlier_done(external_id, place, now)

    @_unavailable_when_unreachable
    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        # A done place may be renewed too: harmless, a lease only matters while not done.
        update = {"$set": {"alive_until": lease_until}}
        ids = [self._place_id(user, place) for user, place in places]
        if self._point_reads:
            for place_id in ids:
                await self._queue.update_one({"_id": place_id}, update)
        else:
            await self._queue.update_many({"_id": {"$in": ids}}, update)

    @_unavailable_when_unreachable
    async def leave(self, external_id: str, place: int, *, served: bool = True) -> None:
        # The place and where to take the next one, in one command: the hint is raised
        # only now, so it never names a place that is not there yet.
        done: Doc = {"q": {"_id": self._place_id(external_id, place)},
                     "u": {"$set": {"done": True, "served": served}}}
        hint = {"$max": {"place": place + 1}}
        next_id = self._next_place_id(external_id)
        _, errors = await self._update(self._queue, [done, {
            "q": {"_id": next_id}, "u": {**hint, "$setOnInsert": {"user": external_id}},
            "upsert": True}])
        if errors:
            if [e.get("index") for e in errors] != [1] or errors[0].get("code") != 11000:
                raise WriteError(str(errors), code=errors[0].get("code"))
            # Two first places upserted the hint at once: the other won.
            await self._queue.update_one({"_id": next_id}, hint)
        if served:
            if len(self._served) >= _SERVED_KEPT:
                self._served.clear()
            self._served[external_id] = place
        elif self._served.get(external_id) == place - 1:
            self._served.pop(external_id, None)
        if served and place >= _QUEUE_KEPT:
            await self._queue.delete_one(
                {"_id": self._place_id(external_id, place - _QUEUE_KEPT)})

    @_unavailable_when_unreachable
    async def delete_user(self, external_id: str) -> bool:
        """Utterances first, the user last: an erasure cut short can be run again, and
        finds the user still there to finish the job."""
        await self._messages.delete_many({"user": _literal(external_id)})
        self._served.pop(external_id, None)
        await self._queue.delete_many({"user": _literal(external_id)})
        human_id = await self._human_id(external_id)
        if human_id is None:
            return False
        dialog_ids = await self._dialogs.distinct("_id", {"human_id": human_id})
        await self._utterances.delete_many({"dialog_id": {"$in": dialog_ids}})
        await self._dialogs.delete_many({"human_id": human_id})
        await self._users.delete_one({"_id": human_id})
        return True

    # -- lifecycle ----------------------------------------------------------------------

    @_unavailable_when_unreachable
    async def ping(self) -> None:
        await self._db.command("ping")

    async def close(self) -> None:
        await self._client.close()

