"""The dialogs on MongoDB: the turn and the read API (see :mod:`agent.store.mongo`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import DocumentTooLarge, DuplicateKeyError, OperationFailure, WriteError

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
from agent.store.base import DialogHead, Place, RatingsFull, TurnStart
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import _escape, _literal, _merge, _unescape
from agent.store.mongo.documents import (
    _TURN_END,
    _annotated,
    _dialog_doc,
    _head,
    _human,
    _human_id_for,
    _new_user_doc,
    _open_dialog_state,
    _open_head,
    _turn_end,
    _turn_end_changes,
    _utterance_body,
    _utterance_doc,
    _utterance_from,
    _utterance_id,
)
from agent.store.mongo.errors import Doc, _unavailable_when_unreachable
from agent.store.mongo.lines import _finishing, _leaving

log = logging.getLogger("chorus.store")

#: Attempts at a free utterance number outside a turn (each failure means another writer
#: took the number: only writers outside the user's line compete).
_ATTEMPTS = 64
#: MongoDB's error codes for a duplicate key and an unknown command.
_DUPLICATE_KEY = 11000
_COMMAND_NOT_FOUND = 59
#: Dialogs read whole by ``_id`` (point reads) on FerretDB when no longer than this.
_POINT_READ_DIALOG = 200


@dataclass(frozen=True, slots=True)
class UserWrites:
    """A finished turn's statements on the user's document: ``at_once`` writes the usual
    case (the dialog still open, the place still served) in one matching statement; when
    none of them matches, ``long_way`` holds in every case, a statement per change."""

    at_once: list[Doc]
    long_way: list[Doc]


class MongoDialogs(MongoBase):
    """:class:`agent.store.DialogStore` on MongoDB, but for erasure and the connection."""

    # -- the user and the open dialog -------------------------------------------------

    async def _user_doc(self, user_id: str) -> Doc:
        """The user's document, created on first contact."""
        human_id = _human_id_for(user_id)
        doc = await self._users.find_one({"_id": human_id})
        if doc is None:
            # DuplicateKeyError: another message created the user first
            with contextlib.suppress(DuplicateKeyError):
                await self._users.insert_one(_new_user_doc(user_id))
            doc = await self._users.find_one({"_id": human_id})
            if doc is None:  # pragma: no cover - erased while being created
                raise LookupError(f"user {user_id!r} vanished while being created")
        return doc

    async def _open_dialog(
        self, user: Doc, channel_type: str, arm: str | None = None
    ) -> tuple[DialogHead, int]:
        """The user's open dialog and its utterance count, opening one (on experiment arm
        ``arm``) when none is."""
        head = _open_head(user)
        if head is not None:
            return head, int(user["dialog"].get("count", 0))
        human_id = str(user["_id"])
        head = DialogHead(
            dialog_id=new_id(),
            channel_type=channel_type,
            date_start=utc_now(),
            human_id=human_id,
            bot=Bot(),
            arm=arm,
        )
        opened = await self._users.update_one(
            {"_id": human_id, "dialog": {"$exists": False}},
            {"$set": {"dialog": _open_dialog_state(head)}},
        )
        if not opened.matched_count:  # another message opened one first: use theirs
            raced = _open_head(await self._users.find_one({"_id": human_id}) or {})
            if raced is not None:
                return raced, 0
            return await self._open_dialog({"_id": human_id}, channel_type, arm)
        await self._dialogs.insert_one(_dialog_doc(head))
        return head, 0

    @_unavailable_when_unreachable
    async def open_turn(
        self, user_id: str, channel_type: str, limit: int, arm: str | None = None
    ) -> TurnStart:
        """The user's document as taking the place in line returned it (no read), else
        read; then the window, by ids computed from the dialog's utterance count. A last
        turn whose answer is stored but whose end on the user's document is not is
        completed first (:func:`~agent.store.mongo.documents._turn_end`)."""
        user = self._snapshots.pop(user_id, None) or await self._user_doc(user_id)
        head, count = await self._open_dialog(user, channel_type, arm)
        docs = await self._window(head.dialog_id, count, limit)
        answer = next((d for d in docs if d["seq"] == count + 1 and d["speaker"] == "bot"), None)
        if answer is not None:
            user = await self._complete_end(user, head.dialog_id, count, answer)
            head, _ = await self._open_dialog(user, channel_type)
        history = [_utterance_from(doc) for doc in docs[-limit:]] if limit > 0 else []
        return TurnStart(_human(user), head, history, completed_last_turn=answer is not None)

    async def _complete_end(self, user: Doc, dialog_id: str, count: int, answer: Doc) -> Doc:
        """Apply the end an answer kept of its turn (its attribute merges and the dialog's
        count) to the user's document, once: the count it read is part of the filter. The
        user's document as it is now."""
        log.warning(
            "dialog %s: the last turn's answer was stored but not the rest of its end; "
            "completing it",
            dialog_id,
        )
        update: Doc = {"$max": {"dialog.count": count + 2}}
        if changes := _turn_end_changes(answer):
            update["$set"] = changes
        done = await self._users.find_one_and_update(
            {"_id": user["_id"], "dialog.id": dialog_id, "dialog.count": count},
            update,
            return_document=ReturnDocument.AFTER,
        )
        return done or await self._users.find_one({"_id": user["_id"]}) or user

    @_unavailable_when_unreachable
    async def human(self, user_id: str) -> Human:
        return _human(await self._user_doc(user_id))

    @_unavailable_when_unreachable
    async def active_dialog(
        self, human: Human, channel_type: str, arm: str | None = None
    ) -> DialogHead:
        user = await self._users.find_one({"_id": _literal(human.id)}) or {"_id": human.id}
        head, _ = await self._open_dialog(user, channel_type, arm)
        return head

    # -- utterances ---------------------------------------------------------------------

    async def _by_ids(self, ids: list[str]) -> list[Doc]:
        """Utterances by ``_id``, in no particular order: one ``$in`` on MongoDB, point
        reads on FerretDB (which scans the whole collection for any other filter)."""
        if not ids:
            return []
        if self._point_reads:
            found = [await self._utterances.find_one({"_id": i}) for i in ids]
            return [doc for doc in found if doc is not None]
        return await self._utterances.find({"_id": {"$in": ids}}).to_list()

    async def _numbered(self, dialog_id: str, seqs: Sequence[int]) -> list[Doc]:
        """The dialog's utterances at these numbers, read by their ids: an id of the
        dialog's numbering that another dialog holds (a restored backup can carry any id)
        is not one of them."""
        docs = await self._by_ids([_utterance_id(dialog_id, s) for s in seqs])
        return [doc for doc in docs if doc.get("dialog_id") == dialog_id]

    async def _held_elsewhere(self, dialog_id: str, seq: int) -> bool:
        """Whether the utterance id of this number is held by another dialog: then the
        number is never free, and skipping it is no contention."""
        doc = await self._utterances.find_one(
            {"_id": _utterance_id(dialog_id, seq)}, projection={"dialog_id": 1}
        )
        return doc is not None and doc.get("dialog_id") != dialog_id

    async def _window(self, dialog_id: str, count: int, limit: int) -> list[Doc]:
        """The documents of the dialog's last ``limit`` utterances, and of those stored past
        ``count``. ``count`` is the number the user's document holds, raised when a turn
        finishes: an attempt that stored its human utterance and then failed left it at
        number ``count``, so that one is read too (and answered by the retry, or kept
        before the next message); one that stored its answer too and then failed left that
        at ``count + 1``, read too where the human one is. Utterances whose ids are not the
        dialog's numbers (a restored backup keeps each utterance's id) are read by their
        ``(dialog_id, seq)`` index instead."""
        if limit <= 0:
            self._keep_next_seq(dialog_id, count)
            return []
        seqs = range(max(0, count - limit), count + 1)
        # MongoDB reads one more id in the same command; point reads (FerretDB) read it
        # only when an unfinished turn's human utterance is there.
        docs = await self._numbered(dialog_id, seqs if self._point_reads else [*seqs, count + 1])
        if self._point_reads and any(doc["seq"] == count for doc in docs):
            docs += await self._numbered(dialog_id, [count + 1])
        docs.sort(key=lambda doc: int(doc["seq"]))
        if [doc["seq"] for doc in docs if doc["seq"] < count] != list(seqs)[:-1]:
            cursor = self._utterances.find(
                {"dialog_id": _literal(dialog_id)}, sort=[("seq", DESCENDING)], limit=limit + 2
            )
            docs = list(reversed(await cursor.to_list()))
        if not any(d["seq"] == count and d.get("speaker") == "human" for d in docs):
            docs = [d for d in docs if d["seq"] != count + 1]  # no unfinished turn's answer
        self._keep_next_seq(dialog_id, max([count - 1, *(int(d["seq"]) for d in docs)]) + 1)
        return docs

    async def _free_seq(self, dialog_id: str) -> int:
        """The next utterance number, for a writer outside a turn: one past the highest."""
        cursor = self._utterances.find(
            {"dialog_id": _literal(dialog_id)},
            sort=[("seq", DESCENDING)],
            limit=1,
            projection={"seq": 1},
        )
        newest = await cursor.to_list()
        return int(newest[0]["seq"]) + 1 if newest else 0

    async def _insert(self, dialog_id: str, utterance: HumanUtterance | BotUtterance) -> int:
        """Insert at the number this turn read, or the next free one; the id follows. A
        number whose id another dialog holds is skipped, without counting as an attempt:
        it is taken for good, and the numbers after it are free."""
        seq = self._next_seqs.pop(dialog_id, None)
        attempts = 0
        while attempts < _ATTEMPTS:
            if seq is None:
                seq = await self._free_seq(dialog_id)
            utterance.utt_id = _utterance_id(dialog_id, seq)
            try:
                await self._utterances.insert_one(_utterance_doc(dialog_id, seq, utterance))
            except DuplicateKeyError:  # taken by a writer outside the line, or elsewhere
                if not await self._held_elsewhere(dialog_id, seq):
                    attempts += 1
                seq = max(await self._free_seq(dialog_id), seq + 1)
                continue
            self._keep_next_seq(dialog_id, seq + 1)
            return seq
        raise RuntimeError(f"no free utterance number in dialog {dialog_id} (contention)")

    @_unavailable_when_unreachable
    async def recent_utterances(self, dialog_id: str, limit: int) -> list[Utterance]:
        if limit <= 0:  # MongoDB reads limit 0 as "no limit"
            return []
        cursor = self._utterances.find(
            {"dialog_id": _literal(dialog_id)}, sort=[("seq", DESCENDING)], limit=limit
        )
        return [_utterance_from(doc) for doc in reversed(await cursor.to_list())]

    @_unavailable_when_unreachable
    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        human = await self._utterances.find_one(
            {"dialog_id": _literal(dialog_id), "message_key": _literal(key)}
        )
        if human is None:
            return []
        after = await self._utterances.find_one(
            {"dialog_id": dialog_id, "seq": int(human["seq"]) + 1}
        )
        return [_utterance_from(doc) for doc in (human, after) if doc is not None]

    @_unavailable_when_unreachable
    async def add_utterance(self, dialog_id: str, utterance: HumanUtterance) -> None:
        await self._insert(dialog_id, utterance)

    @_unavailable_when_unreachable
    async def finish_turn(
        self,
        dialog_id: str,
        human_id: str,
        utterance: HumanUtterance,
        bot_utterance: BotUtterance,
        human_attributes: dict[str, Any],
        bot_attributes: dict[str, Any],
        *,
        human_profile: dict[str, Any] | None = None,
        replace_human_attributes: bool = False,
        place: Place | None = None,
        again: bool = False,
    ) -> None:
        if again and await self._end_completed(dialog_id, human_id, bot_utterance, place):
            return
        user: Doc = {}
        if replace_human_attributes:
            user["attributes"] = _escape(human_attributes)
        elif human_attributes:
            user.update(_merge("attributes", human_attributes))
        if human_profile:
            user.update(_merge("profile", human_profile))

        bot: Doc = _merge("dialog.bot.attributes", bot_attributes) if bot_attributes else {}
        end = _turn_end({**user, **bot})

        def on_users(seq: int) -> UserWrites:
            """The statements on the user's document, once the answer's number is known."""
            dialog: Doc = {"$max": {"dialog.count": seq + 1}}
            if bot:
                dialog["$set"] = bot
            in_dialog = {"_id": _literal(human_id), "dialog.id": dialog_id}
            # The usual case: the dialog still open, the place still served.
            together: Doc = {**dialog, "$set": {**user, **bot}} if user or bot else dialog
            at_once = (
                [{"q": in_dialog, "u": together}]
                if place is None
                else _finishing(place, utc_now(), in_dialog, together)
            )
            long_way: list[Doc] = []
            if user:
                long_way.append({"q": {"_id": _literal(human_id)}, "u": {"$set": user}})
            long_way.append({"q": in_dialog, "u": dialog})
            if place is not None:
                long_way += _leaving(place, True, utc_now())
            return UserWrites(at_once, long_way)

        if not (
            self._bulk_write
            and await self._finish_at_once(dialog_id, utterance, bot_utterance, end, on_users)
        ):
            seq = await self._answer(dialog_id, utterance, bot_utterance, end)
            # Kept until the turn's end is stored: a retry of a refused end (with the
            # services' outputs dropped) writes the same answer again (see _answer).
            self._keep_next_seq(dialog_id, seq)
            writes = on_users(seq)
            if not (await self._update_users(writes.at_once)).get("n"):
                await self._update_users(writes.long_way)
        self._next_seqs.pop(dialog_id, None)
        if place is not None:
            place.left = True

    async def _end_completed(
        self, dialog_id: str, human_id: str, bot_utterance: BotUtterance, place: Place | None
    ) -> bool:
        """After a turn's end was cut short: if its answer is stored, complete the rest as
        the next turn would (:meth:`_complete_end`, at most once), leave the line, and say
        True; False when the answer is not stored (the end is then written whole; its
        other statements are idempotent)."""
        stored = await self._utterances.find_one({"_id": _literal(bot_utterance.utt_id)})
        if stored is None or stored.get("speaker") != "bot" or stored.get("dialog_id") != dialog_id:
            return False
        user = await self._users.find_one({"_id": _literal(human_id)}) or {}
        state = user.get("dialog")
        seq = int(stored["seq"])
        if (
            isinstance(state, dict)
            and state.get("id") == dialog_id
            and int(state.get("count", 0)) == seq - 1
        ):
            await self._complete_end(user, dialog_id, seq - 1, stored)
        if place is not None:
            await self._update_users(_leaving(place, True, utc_now()))
            place.left = True
        self._next_seqs.pop(dialog_id, None)
        return True

    async def _finish_at_once(
        self,
        dialog_id: str,
        utterance: HumanUtterance,
        bot_utterance: BotUtterance,
        end: Doc | None,
        on_users: Callable[[int], UserWrites],
    ) -> bool:
        """MongoDB 8: the annotated human utterance, the answer (a plain insert at the
        number this turn read) and the statements on the user's document in one ordered
        ``bulkWrite``. False, with nothing of the turn's end lost, when the long way must
        do it: the number is not known, this is the retry of a refused end, the answer's
        number was taken by a writer outside the line, the server has no ``bulkWrite``
        after all, or the whole end is too large for one command (the long way sends the
        utterances and the user's statements in two)."""
        seq = self._next_seqs.get(dialog_id)
        if seq is None or bot_utterance.utt_id == _utterance_id(dialog_id, seq):
            return False
        given = bot_utterance.utt_id
        bot_utterance.utt_id = _utterance_id(dialog_id, seq)

        def update(collection: int, statement: Doc) -> Doc:
            """An ``update`` statement as a ``bulkWrite`` operation."""
            return {"update": collection, "filter": statement["q"], "updateMods": statement["u"]}

        writes = on_users(seq)
        ops: list[Doc] = [
            update(0, _annotated(utterance)),
            {"insert": 0, "document": _utterance_doc(dialog_id, seq, bot_utterance, end)},
            *(update(1, statement) for statement in writes.at_once),
        ]
        namespaces = [{"ns": f"{self._db.name}.{c.name}"} for c in (self._utterances, self._users)]
        command = {"bulkWrite": 1, "ops": ops, "nsInfo": namespaces, "errorsOnly": True}
        try:
            reply = await self._client.admin.command(command)
        except DocumentTooLarge:
            bot_utterance.utt_id = given
            return False
        except OperationFailure as exc:
            if exc.code != _COMMAND_NOT_FOUND:
                raise
            # A server that reports MongoDB 8's wire version without its bulkWrite (a
            # proxy, a compatible service): every turn's end goes the long way from now on.
            log.warning(
                "the database reports MongoDB 8 but has no bulkWrite: a turn's end is "
                "written in two commands"
            )
            self._bulk_write = False
            bot_utterance.utt_id = given
            return False
        errors: list[Doc] = reply["cursor"]["firstBatch"]
        if not errors:
            # Both updates matched (the annotation's and the user's), or the user's
            # statements go the long way; they are idempotent, so an unmatched annotation
            # (the utterance erased meanwhile) costs a second write, nothing more.
            if int(reply.get("nMatched", 0)) < 2:
                await self._update_users(writes.long_way)
            return True
        failed = errors[0]
        if failed.get("idx") == 1 and failed.get("code") == _DUPLICATE_KEY:
            # The answer's number was taken: the long way writes the annotation again
            # (idempotent) and the answer at the next free number.
            bot_utterance.utt_id = given
            self._next_seqs[dialog_id] = seq + 1
            return False
        raise WriteError(str(failed.get("errmsg")), code=failed.get("code"))

    async def _answer(
        self,
        dialog_id: str,
        utterance: HumanUtterance,
        bot_utterance: BotUtterance,
        end: Doc | None,
    ) -> int:
        """The annotated human utterance and the bot's answer (with its turn's ``end``) in
        one ``update`` command: the answer is an upsert that only inserts, at the number
        after the human's. Its number, found again if a writer outside the line took it."""
        seq = self._next_seqs.pop(dialog_id, None)
        if seq is None:
            seq = await self._free_seq(dialog_id)
        annotated: Doc = _annotated(utterance)
        attempts = 0
        while attempts < _ATTEMPTS:
            # An answer whose id is already this number was given it by an attempt of this
            # turn whose end was refused: this one writes it again, reduced.
            again = bot_utterance.utt_id == _utterance_id(dialog_id, seq)
            bot_utterance.utt_id = _utterance_id(dialog_id, seq)
            body = _utterance_body(bot_utterance)
            if end:
                body[_TURN_END] = end
            answer = {
                "q": {"_id": bot_utterance.utt_id},
                "u": {"$setOnInsert": {"dialog_id": dialog_id, "seq": seq, **body}},
                "upsert": True,
            }
            reply, errors = await self._annotate_and_answer(annotated, answer)
            # A duplicate key: another writer inserted the answer's number at the same time
            # (FerretDB does not always say which statement failed, so the annotation,
            # idempotent, is written again on its own).
            raced = bool(errors) and all(e.get("code") == _DUPLICATE_KEY for e in errors)
            if errors and not raced:
                raise WriteError(str(errors), code=errors[0].get("code"))
            if raced and annotated:
                await self._utterances.update_one(annotated["q"], annotated["u"])
            if reply.get("upserted"):
                return seq
            annotated = {}
            if again and not raced:
                update: Doc = {"$set": body} if end else {"$set": body, "$unset": {_TURN_END: ""}}
                await self._utterances.update_one({"_id": bot_utterance.utt_id}, update)
                return seq
            # Taken by a writer outside the line, or held by another dialog (for good:
            # no contention, see _insert).
            if not await self._held_elsewhere(dialog_id, seq):
                attempts += 1
            seq += 1
        raise RuntimeError(f"no free utterance number in dialog {dialog_id} (contention)")

    async def _annotate_and_answer(self, annotated: Doc, answer: Doc) -> tuple[Doc, list[Doc]]:
        """The two statements in one command, or in two when together they are over
        MongoDB's 16 MB (each is under it: the storage bounds see to that). The answer's
        reply and errors."""
        if not annotated:
            return await self._update(self._utterances, [answer])
        try:
            return await self._update(self._utterances, [annotated, answer])
        except DocumentTooLarge:
            reply, errors = await self._update(self._utterances, [annotated])
            if errors:
                return reply, errors
            return await self._update(self._utterances, [answer])

    # -- dialogs ------------------------------------------------------------------------

    @_unavailable_when_unreachable
    async def close_active_dialog(self, user_id: str) -> str | None:
        user = await self._users.find_one({"_id": _human_id_for(user_id)})
        head = None if user is None else _open_head(user)
        if user is None or head is None:
            return None
        count = int(user["dialog"].get("count", 0))
        closed = _dialog_doc(head, count=count, active=False)
        closed.update(date_finish=utc_now())
        del closed["_id"], closed["opened_ns"]
        # The dialog's document first: a close cut short leaves the dialog open, and
        # closing it again finishes the job.
        await self._dialogs.update_one(
            {"_id": head.dialog_id}, {"$set": closed, "$setOnInsert": {"opened_ns": 0}}, upsert=True
        )
        released = await self._users.update_one(
            {"_id": user["_id"], "dialog.id": head.dialog_id}, {"$unset": {"dialog": ""}}
        )
        return head.dialog_id if released.modified_count else None

    def _as_read(self, doc: Doc, user: Doc) -> DialogHead:
        """A dialog's head for reading: while it is open, what changes lives with the user."""
        head = _head(doc)
        open_head = _open_head(user)
        if open_head is not None and open_head.dialog_id == head.dialog_id:
            head = head.model_copy(
                update={"bot": open_head.bot, "attributes": open_head.attributes}
            )
        return _with_ratings(head, doc)

    async def _with_utterances(self, heads: list[Doc], users: dict[str, Doc]) -> list[Dialog]:
        """Whole dialogs (each head's user in ``users``, by ``_id``): all their utterances
        in one indexed query, grouped in order. On FerretDB, a short dialog is read by
        ``_id`` instead (it scans every utterance of every dialog for the query)."""
        by_dialog: dict[str, list[Doc]] = {}
        if self._point_reads:
            for head in heads:
                user = users[head["human_id"]]
                docs = await self._by_number(head["_id"], self._count(head, user))
                if docs is not None:
                    by_dialog[head["_id"]] = docs
        rest = [head["_id"] for head in heads if head["_id"] not in by_dialog]
        if rest:
            by_dialog.update({i: [] for i in rest})
            cursor = self._utterances.find(
                {"dialog_id": {"$in": rest}}, sort=[("dialog_id", ASCENDING), ("seq", ASCENDING)]
            )
            async for doc in cursor:
                by_dialog[doc["dialog_id"]].append(doc)
        dialogs = []
        for doc in heads:
            user = users[doc["human_id"]]
            read = self._as_read(doc, user)
            utterances = [_utterance_from(u) for u in by_dialog[read.dialog_id]]
            dialogs.append(
                Dialog(
                    **read.model_dump(exclude={"human_id"}),
                    human=_human(user),
                    utterances=utterances,
                )
            )
        return dialogs

    @staticmethod
    def _count(head: Doc, user: Doc) -> int:
        state = user.get("dialog")
        if isinstance(state, dict) and state.get("id") == head["_id"]:
            return int(state.get("count", 0))
        return int(head.get("utterance_count", 0))

    async def _by_number(self, dialog_id: str, count: int) -> list[Doc] | None:
        """Every utterance of a short dialog, read by ``_id`` (plus any stored past the
        count by an unfinished turn); None when the ids do not name them all (a longer
        dialog, or one restored from a backup, whose utterances keep their ids)."""
        if count > _POINT_READ_DIALOG:
            return None
        docs = sorted(
            await self._numbered(dialog_id, range(count)), key=lambda doc: int(doc["seq"])
        )
        if [doc["seq"] for doc in docs] != list(range(count)):
            return None
        while (
            extra := await self._utterances.find_one(
                {"_id": _utterance_id(dialog_id, count), "dialog_id": dialog_id}
            )
        ) is not None:
            docs.append(extra)
            count += 1
        return docs

    @_unavailable_when_unreachable
    async def dialog(self, dialog_id: str) -> Dialog | None:
        head = await self._dialogs.find_one({"_id": _literal(dialog_id)})
        if head is None:
            return None
        user = await self._users.find_one({"_id": head["human_id"]})
        if user is None:
            return None
        (dialog,) = await self._with_utterances([head], {user["_id"]: user})
        return dialog

    @_unavailable_when_unreachable
    async def dialogs(self, dialog_ids: Sequence[str]) -> list[Dialog]:
        """Three queries whatever the number: the heads and their users by ``_id``, and
        every utterance of them by ``dialog_id`` (on FerretDB, one scan of the utterances
        for the group instead of one per dialog)."""
        ids = [_literal(i) for i in dict.fromkeys(dialog_ids)]
        if not ids:
            return []
        found = {doc["_id"]: doc async for doc in self._dialogs.find({"_id": {"$in": ids}})}
        owners = list({doc["human_id"] for doc in found.values()})
        users = {doc["_id"]: doc async for doc in self._users.find({"_id": {"$in": owners}})}
        heads = [found[i] for i in ids if i in found and found[i]["human_id"] in users]
        return await self._with_utterances(heads, users) if heads else []

    @_unavailable_when_unreachable
    async def user_dialogs(self, user_id: str) -> list[Dialog] | None:
        user = await self._users.find_one({"_id": _human_id_for(user_id)})
        if user is None:
            return None
        cursor = self._dialogs.find(
            {"human_id": user["_id"]}, sort=[("date_start", ASCENDING), ("opened_ns", ASCENDING)]
        )
        heads = await cursor.to_list()
        return await self._with_utterances(heads, {user["_id"]: user}) if heads else []

    @_unavailable_when_unreachable
    async def mark_interrupted(self, utt_id: str) -> None:
        await self._utterances.update_one(
            {"_id": _literal(utt_id), "speaker": "human"}, {"$set": {"interrupted": True}}
        )

    @_unavailable_when_unreachable
    async def rate_utterance(self, user_id: str, utt_id: str, rating: float) -> bool:
        """One update that matches the utterance and its owner together, after reading the
        user's dialogs: a rating of another user's utterance and of a missing one send the
        same two commands, so the answer's timing does not tell which ids exist."""
        owned = await self._dialogs.distinct("_id", {"human_id": _human_id_for(user_id)})
        result = await self._utterances.update_one(
            {"_id": _literal(utt_id), "speaker": "bot", "dialog_id": {"$in": owned}},
            {"$set": {"rating": rating}},
        )
        return result.matched_count > 0

    @_unavailable_when_unreachable
    async def list_dialog_ids(self, offset: int, limit: int, active: bool | None) -> list[str]:
        cursor = self._dialogs.find(
            {} if active is None else {"active": active},
            projection={"_id": 1},
            sort=[("date_start", ASCENDING), ("opened_ns", ASCENDING)],
            skip=offset,
            limit=limit,
        )
        return [str(doc["_id"]) async for doc in cursor]

    @_unavailable_when_unreachable
    async def dialog_by_dp_agent_id(self, object_id: str) -> str | None:
        doc = await self._dialogs.find_one(
            {"dp_agent_id": _literal(object_id)}, projection={"_id": 1}
        )
        return None if doc is None else str(doc["_id"])

    @_unavailable_when_unreachable
    async def dialog_starts(self, prefix: str) -> dict[str, datetime]:
        cursor = self._dialogs.find(
            {"_id": {"$gte": _literal(prefix), "$lt": prefix + "\U0010ffff"}},
            projection={"date_start": 1},
            limit=10,
        )
        return {str(doc["_id"]): _aware(doc["date_start"]) async for doc in cursor}

    @_unavailable_when_unreachable
    async def add_dialog_rating(
        self,
        dialog_id: str,
        entry: dict[str, Any],
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        # Not in ``attributes``: while the dialog is open those live with the user and are
        # written over the dialog's document when it closes. Reads merge them back.
        query: Doc = {"_id": _literal(dialog_id)}
        if user_id is not None:
            query["human_id"] = _human_id_for(user_id)
        update: Doc = {"$push": {_RATINGS: _escape(entry)}}
        if rating is not None:
            update["$set"] = {"rating": rating}
        result = await self._dialogs.update_one({**query, **_room(_RATINGS, max_ratings)}, update)
        if (
            result.matched_count == 0
            and max_ratings is not None
            and await self._dialogs.find_one(query, projection={"_id": 1}) is not None
        ):
            raise RatingsFull(f"dialog {dialog_id!r}", max_ratings)
        return result.matched_count > 0

    @_unavailable_when_unreachable
    async def add_utterance_rating(
        self,
        utt_id: str,
        entry: dict[str, Any],
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        owner: Doc = {"_id": _literal(utt_id), "speaker": "bot"}
        if user_id is not None:  # one update matching the answer and its owner together
            owned = await self._dialogs.distinct("_id", {"human_id": _human_id_for(user_id)})
            owner["dialog_id"] = {"$in": owned}
        query = {**owner, **_room("attributes.ratings", max_ratings)}
        numeric: Doc = {} if rating is None else {"rating": rating}
        try:
            update: Doc = {"$push": {"attributes.ratings": _escape(entry)}}
            if numeric:
                update["$set"] = numeric
            result = await self._utterances.update_one(query, update)
        except WriteError:  # a service left a value there that is not a list: keep it first
            doc = await self._utterances.find_one(query, projection={"attributes.ratings": 1})
            if doc is None:
                return False
            kept = doc.get("attributes", {}).get("ratings")
            result = await self._utterances.update_one(
                {**query, "attributes.ratings": kept},
                {"$set": {"attributes.ratings": [kept, _escape(entry)], **numeric}},
            )
        if (
            result.matched_count == 0
            and max_ratings is not None
            and await self._utterances.find_one(owner, projection={"_id": 1}) is not None
        ):
            raise RatingsFull(f"bot utterance {utt_id!r}", max_ratings)
        return result.matched_count > 0


def _room(field: str, max_ratings: int | None) -> Doc:
    """The condition that the list ``field`` has room for one more item: its item number
    ``max_ratings - 1`` does not exist, checked in the same update as the append."""
    return {} if max_ratings is None else {f"{field}.{max_ratings - 1}": {"$exists": False}}


#: The dialog document's field with the ratings given in dp-agent's form.
_RATINGS = "dp_agent_ratings"


def _with_ratings(head: DialogHead, doc: Doc) -> DialogHead:
    """The head with the dialog's dp-agent ratings at the end of ``attributes.ratings``."""
    added = doc.get(_RATINGS)
    if not isinstance(added, list) or not added:
        return head
    kept = head.attributes.get("ratings")
    ratings = kept if isinstance(kept, list) else ([] if kept is None else [kept])
    attributes = {**head.attributes, "ratings": [*ratings, *_unescape(added)]}
    return head.model_copy(update={"attributes": attributes})


def _aware(moment: datetime) -> datetime:
    """A date as stored (PyMongo reads BSON dates naive unless told): aware UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
