"""A turn's end on MongoDB: the annotated human utterance, the answer and the user's document
(attribute merges, the dialog's count, leaving the queue), in as few commands as the server
allows (see :mod:`agent.store.mongo` and docs/storage.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DocumentTooLarge, OperationFailure, WriteError

from agent.state.models import BotUtterance, HumanUtterance, utc_now
from agent.store.base import Place, PlaceLost, TurnEnd, overtaken
from agent.store.mongo.base import MongoBase, MongoDb
from agent.store.mongo.codec import escape, literal, merge_set
from agent.store.mongo.documents import (
    END_TAKEN,
    TURN_END,
    annotated_update,
    turn_end_changes,
    turn_end_of,
    utterance_body,
    utterance_doc,
    utterance_id,
)
from agent.store.mongo.errors import Doc, unavailable_when_unreachable
from agent.store.mongo.numbering import ATTEMPTS, Numbering
from agent.store.mongo.queues import finishing, leaving

log = logging.getLogger("chorus.store")

#: MongoDB's error codes for a duplicate key and an unknown command.
_DUPLICATE_KEY = 11000
_COMMAND_NOT_FOUND = 59


@dataclass(frozen=True, slots=True)
class UserWrites:
    """A finished turn's statements on the user's document: ``combined`` writes the usual
    case (the dialog still open, the place still served) in one matching statement; when
    none of them matches, a turn without a place goes ``per_change`` (the long way, a
    statement per change, which holds in every case), and a turn with one goes
    ``fenced``: the user's changes and leaving, matching only while the place is still
    served (the dialog was closed meanwhile). Neither matching means the place was passed
    over (:meth:`MongoTurnEnd._retract`)."""

    combined: list[Doc]
    per_change: list[Doc]
    fenced: list[Doc]


def serving(place: Place) -> Doc:
    """The condition that the user's queue still serves ``place``."""
    return {"line.done": place.number}


async def complete_end(
    users: AsyncCollection[Doc],
    utterances: AsyncCollection[Doc],
    user: Doc,
    dialog_id: str,
    count: int,
    answer: Doc,
) -> Doc | None:
    """Apply the end an answer kept of its turn (its attribute merges and the dialog's
    count) to the user's document, once: the count it read is part of the filter. The
    user's document as it is now; None when the answer is gone: its turn, passed over in
    the queue, took it back (:meth:`MongoTurnEnd._retract`), and nothing is completed.

    The answer is marked :data:`END_TAKEN` first, in one update of its document: of this
    and its turn's retraction (a delete of the unmarked answer) exactly one happens, so
    the end is either completed by the turn that found it, which builds on it, or taken
    back by its own turn, never both."""
    taken = await utterances.update_one({"_id": answer["_id"]}, {"$set": {END_TAKEN: True}})
    if not taken.matched_count:
        log.warning("dialog %s: the last turn's answer was taken back by its turn", dialog_id)
        return None
    log.warning(
        "dialog %s: the last turn's answer was stored but not the rest of its end; completing it",
        dialog_id,
    )
    update: Doc = {"$max": {"dialog.count": count + 2}}
    if changes := turn_end_changes(answer):
        update["$set"] = changes
    done = await users.find_one_and_update(
        {"_id": user["_id"], "dialog.id": dialog_id, "dialog.count": count},
        update,
        return_document=ReturnDocument.AFTER,
    )
    return done or await users.find_one({"_id": user["_id"]}) or user


class MongoTurnEnd(MongoBase):
    """:meth:`agent.store.base.TurnStore.finish_turn` on MongoDB (:class:`~.turns.MongoTurns`
    answers it through this part, the largest of the turn)."""

    def __init__(self, m: MongoDb, numbering: Numbering) -> None:
        super().__init__(m)
        self._numbering = numbering

    @unavailable_when_unreachable
    async def finish_turn(self, end: TurnEnd, *, retrying: bool = False) -> None:
        dialog_id, human_id, place, kept_place = end.dialog_id, end.human_id, end.leave, end.keep
        utterance, bot_utterance = end.utterance, end.answer
        if retrying and await self._end_completed(dialog_id, human_id, bot_utterance, place):
            return
        user: Doc = {}
        if end.replace_human_attributes:
            user["attributes"] = escape(end.human_attributes)
        elif end.human_attributes:
            user.update(merge_set("attributes", end.human_attributes))
        if end.human_profile:
            user.update(merge_set("profile", end.human_profile))
        bot: Doc = (
            merge_set("dialog.bot.attributes", end.bot_attributes) if end.bot_attributes else {}
        )
        kept = turn_end_of({**user, **bot})  # what the answer keeps of the end (see _answer)

        def on_users(seq: int) -> UserWrites:
            """The statements on the user's document, once the answer's number is known."""
            dialog: Doc = {"$max": {"dialog.count": seq + 1}}
            if bot:
                dialog["$set"] = bot
            in_dialog = {"_id": literal(human_id), "dialog.id": dialog_id}
            # The usual case: the dialog still open, the place still served.
            together: Doc = {**dialog, "$set": {**user, **bot}} if user or bot else dialog
            if place is not None:
                combined = finishing(place, utc_now(), in_dialog, together)
            elif kept_place is not None:
                combined = [{"q": {**in_dialog, **serving(kept_place)}, "u": together}]
            else:
                combined = [{"q": in_dialog, "u": together}]
            per_change: list[Doc] = []
            if user:
                per_change.append({"q": {"_id": literal(human_id)}, "u": {"$set": user}})
            per_change.append({"q": in_dialog, "u": dialog})
            fenced: list[Doc] = []
            changes: Doc = {"$set": user} if user else {}
            if place is not None:
                per_change += leaving(place, True, utc_now())
                fenced = finishing(place, utc_now(), {"_id": literal(human_id)}, changes)
            elif kept_place is not None:  # $max of line.done to itself: matches, changes nothing
                fenced = [
                    {
                        "q": {"_id": literal(human_id), **serving(kept_place)},
                        "u": changes or {"$max": serving(kept_place)},
                    }
                ]
            return UserWrites(combined, per_change, fenced)

        if not (self._m.bulk_write and await self._finish_in_one_command(end, kept, on_users)):
            seq = await self._answer(dialog_id, utterance, bot_utterance, kept)
            # Kept until the turn's end is stored: a retry of a refused end (with the
            # services' outputs dropped) writes the same answer again (see _answer).
            self._numbering.keep(dialog_id, seq)
            writes = on_users(seq)
            if not (await self._update_users(writes.combined)).get("n"):
                await self._unmatched(end, writes)
        self._numbering.take(dialog_id)
        if place is not None:
            place.left = True

    async def _unmatched(self, end: TurnEnd, writes: UserWrites) -> None:
        """The turn's end when its ``combined`` statements matched nothing: the long way
        for a turn without a place; for one with a place, its changes fenced on the place
        (the dialog was closed meanwhile), or, when the place was passed over, taken
        back (:meth:`_retract`)."""
        held = end.held
        if held is None:
            await self._update_users(writes.per_change)
        elif not (await self._update_users(writes.fenced)).get("n"):
            await self._retract(end, held)

    async def _retract(self, end: TurnEnd, place: Place) -> None:
        """A turn whose place was passed over (its agent stalled past the lease) while it
        ran: the message behind it may have read the same state, so its end must not be
        stored on top. Its answer, already written, is deleted unless the turn that took
        over found it first and completed its end (:func:`complete_end`, which marks it
        :data:`END_TAKEN`: then this turn stands, the next one built on it); its human
        utterance is stored as :func:`overtaken` says, and :class:`PlaceLost` raised."""
        answer = end.answer.utt_id
        deleted = await self._utterances.delete_one(
            {"_id": literal(answer), "speaker": "bot", END_TAKEN: {"$exists": False}}
        )
        if not deleted.deleted_count and await self._utterances.find_one(
            {"_id": literal(answer), END_TAKEN: True}, {"_id": 1}
        ):
            log.warning(
                "dialog %s: the turn of %s lost its place in the queue, but the next turn "
                "had completed it already",
                end.dialog_id,
                end.utterance.utt_id,
            )
            place.left = True
            return
        kept = annotated_update(overtaken(end.utterance))
        await self._utterances.update_one(kept["q"], kept["u"])
        self._numbering.take(end.dialog_id)
        place.left = True  # passed over: the queue has moved on, nothing to give back
        raise PlaceLost(end.utterance.utt_id)

    async def _end_completed(
        self, dialog_id: str, human_id: str, bot_utterance: BotUtterance, place: Place | None
    ) -> bool:
        """After a turn's end was cut short: if its answer is stored, complete the rest as
        the next turn would (:func:`complete_end`, at most once), leave the queue, and say
        True; False when the answer is not stored (the end is then written whole; its
        other statements are idempotent)."""
        stored = await self._utterances.find_one({"_id": literal(bot_utterance.utt_id)})
        if stored is None or stored.get("speaker") != "bot" or stored.get("dialog_id") != dialog_id:
            return False
        user = await self._users.find_one({"_id": literal(human_id)}) or {}
        state = user.get("dialog")
        seq = int(stored["seq"])
        if (
            isinstance(state, dict)
            and state.get("id") == dialog_id
            and int(state.get("count", 0)) == seq - 1
        ):
            await complete_end(self._users, self._utterances, user, dialog_id, seq - 1, stored)
        if place is not None:
            await self._update_users(leaving(place, True, utc_now()))
            place.left = True
        self._numbering.take(dialog_id)
        return True

    async def _finish_in_one_command(
        self, turn_end: TurnEnd, end: Doc | None, on_users: Callable[[int], UserWrites]
    ) -> bool:
        """MongoDB 8: the annotated human utterance, the answer (a plain insert at the
        number this turn read) and the statements on the user's document in one ordered
        ``bulkWrite``. False, with nothing of the turn's end lost, when the long way must
        do it: the number is not known, this is the retry of a refused end, the answer's
        number was taken by a writer outside the queue, the server has no ``bulkWrite``
        after all, or the whole end is too large for one command (the long way sends the
        utterances and the user's statements in two)."""
        dialog_id, utterance = turn_end.dialog_id, turn_end.utterance
        bot_utterance = turn_end.answer
        seq = self._numbering.peek(dialog_id)
        if seq is None or bot_utterance.utt_id == utterance_id(dialog_id, seq):
            return False
        given = bot_utterance.utt_id
        bot_utterance.utt_id = utterance_id(dialog_id, seq)

        def update(collection: int, statement: Doc) -> Doc:
            """An ``update`` statement as a ``bulkWrite`` operation."""
            return {"update": collection, "filter": statement["q"], "updateMods": statement["u"]}

        writes = on_users(seq)
        ops: list[Doc] = [
            update(0, annotated_update(utterance)),
            {"insert": 0, "document": utterance_doc(dialog_id, seq, bot_utterance, end)},
            *(update(1, statement) for statement in writes.combined),
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
            self._m.bulk_write = False
            bot_utterance.utt_id = given
            return False
        errors: list[Doc] = reply["cursor"]["firstBatch"]
        if not errors:
            # Both updates matched (the annotation's and the user's), or the user's
            # statements go the long way (see _unmatched). One matched: the annotation's
            # (its utterance is there) or the user's (the utterance was erased meanwhile).
            matched = int(reply.get("nMatched", 0))
            if matched == 0 or (
                matched == 1
                and await self._utterances.find_one({"_id": literal(utterance.utt_id)}, {"_id": 1})
            ):
                await self._unmatched(turn_end, writes)
            return True
        failed = errors[0]
        if failed.get("idx") == 1 and failed.get("code") == _DUPLICATE_KEY:
            # The answer's number was taken: the long way writes the annotation again
            # (idempotent) and the answer at the next free number.
            bot_utterance.utt_id = given
            self._numbering.keep(dialog_id, seq + 1)
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
        after the human's. Its number, found again if a writer outside the queue took it."""
        seq = self._numbering.take(dialog_id)
        if seq is None:
            seq = await self._numbering.free_seq(dialog_id)
        annotated: Doc = annotated_update(utterance)
        attempts = 0
        while attempts < ATTEMPTS:
            # An answer whose id is already this number was given it by an attempt of this
            # turn whose end was refused: this one writes it again, reduced.
            again = bot_utterance.utt_id == utterance_id(dialog_id, seq)
            bot_utterance.utt_id = utterance_id(dialog_id, seq)
            body = utterance_body(bot_utterance)
            if end:
                body[TURN_END] = end
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
                update: Doc = {"$set": body} if end else {"$set": body, "$unset": {TURN_END: ""}}
                await self._utterances.update_one({"_id": bot_utterance.utt_id}, update)
                return seq
            # Taken by a writer outside the queue, or held by another dialog (for good:
            # no contention, see _insert).
            if not await self._numbering.held_elsewhere(dialog_id, seq):
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
