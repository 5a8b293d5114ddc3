"""The dialogs on MongoDB: the turn and the read API (see :mod:`agent.store.mongo`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError, WriteError

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
from agent.store.base import DialogHead
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import _escape, _literal, _merge
from agent.store.mongo.documents import (
    _active_key,
    _closed_key,
    _dialog_doc,
    _head,
    _human,
    _human_doc,
    _human_id_for,
    _utterance_body,
    _utterance_from,
)
from agent.store.mongo.errors import Doc, _unavailable_when_unreachable

#: Slots of the ring of newest utterance ids in a dialog document: the widest window a
#: service can ask for (``context_window`` ≤ 100), so the document stays small however long
#: the dialog (FerretDB 1.x ignores ``$push``'s ``$slice``, so a list could not be capped).
RECENT_IDS = 100
#: Attempts of a compare-and-set loop before giving up (each failure means another
#: writer made progress, so this is only reached under pathological contention).
_ATTEMPTS = 10
#: Utterance numbers kept between a turn's reads and writes; more means turns that failed
#: in between, whose numbers are dropped (a turn without one asks the dialog for one).
_NEXT_SEQS_KEPT = 4096


class MongoDialogs(MongoBase):
    """:class:`agent.store.DialogStore` on MongoDB, but for erasure and the connection."""

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
