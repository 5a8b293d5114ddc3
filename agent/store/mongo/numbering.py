"""The numbering of a dialog's utterances on MongoDB: an utterance's ``_id`` is its dialog's
id and its number, so a turn reads its window by ``_id`` and writes at the number it read.

A writer outside the user's queue (a rating's utterance, a restore) may take a number a turn
read: the insert then fails on the unique ``(dialog_id, seq)`` index and takes the next free
one. The number a turn read is kept here, from the window's read to the turn's end, so its
writes need no read of their own (:data:`KEPT` numbers at most: a turn that stopped midway
leaves its number, and when the memory is full it is emptied; the next write reads the
number again).
"""

from __future__ import annotations

from collections.abc import Sequence

from pymongo import DESCENDING
from pymongo.errors import DuplicateKeyError

from agent.state.models import NOT_SHOWN, BotUtterance, HumanUtterance
from agent.store.mongo.base import MongoBase, MongoDb
from agent.store.mongo.codec import literal
from agent.store.mongo.documents import utterance_doc, utterance_id
from agent.store.mongo.errors import Doc

#: Attempts at a free utterance number outside a turn (each failure means another writer
#: took the number: only writers outside the user's queue compete).
ATTEMPTS = 64
#: Numbers kept at most (see the module's docstring).
KEPT = 4096
#: The projection of a read as shown: the fields of :data:`NOT_SHOWN` left out by the
#: database, so that they are neither sent, decoded, unescaped nor validated.
AS_SHOWN: Doc = {name: 0 for name in NOT_SHOWN}


class Numbering(MongoBase):
    """The next utterance number of the dialogs this process's turns are in, and the reads
    and inserts by number."""

    def __init__(self, m: MongoDb) -> None:
        super().__init__(m)
        #: dialog id → the next utterance number, as its turn read it
        self._next_seqs: dict[str, int] = {}

    def keep(self, dialog_id: str, seq: int) -> None:
        if len(self._next_seqs) >= KEPT:
            self._next_seqs.clear()
        self._next_seqs[dialog_id] = seq

    def peek(self, dialog_id: str) -> int | None:
        return self._next_seqs.get(dialog_id)

    def take(self, dialog_id: str) -> int | None:
        """The number kept for the dialog, forgotten."""
        return self._next_seqs.pop(dialog_id, None)

    async def by_ids(self, ids: list[str], projection: Doc | None = None) -> list[Doc]:
        """Utterances by ``_id``, in no particular order: one ``$in`` on MongoDB, point
        reads on FerretDB (which scans the whole collection for any other filter).
        ``projection``: the fields left out (:data:`AS_SHOWN`), or None: whole."""
        if not ids:
            return []
        if self._point_reads:
            found = [await self._utterances.find_one({"_id": i}, projection) for i in ids]
            return [doc for doc in found if doc is not None]
        return await self._utterances.find({"_id": {"$in": ids}}, projection).to_list()

    async def numbered(
        self, dialog_id: str, seqs: Sequence[int], projection: Doc | None = None
    ) -> list[Doc]:
        """The dialog's utterances at these numbers, read by their ids: an id of the
        dialog's numbering that another dialog holds (a restored backup can carry any id)
        is not one of them."""
        docs = await self.by_ids([utterance_id(dialog_id, s) for s in seqs], projection)
        return [doc for doc in docs if doc.get("dialog_id") == dialog_id]

    async def held_elsewhere(self, dialog_id: str, seq: int) -> bool:
        """Whether the utterance id of this number is held by another dialog: then the
        number is never free, and skipping it is no contention."""
        doc = await self._utterances.find_one(
            {"_id": utterance_id(dialog_id, seq)}, projection={"dialog_id": 1}
        )
        return doc is not None and doc.get("dialog_id") != dialog_id

    async def window(
        self, dialog_id: str, count: int, limit: int, *, whole: bool = True
    ) -> list[Doc]:
        """The documents of the dialog's last ``limit`` utterances, and of those stored past
        ``count``. ``count`` is the number the user's document holds, raised when a turn
        finishes: an attempt that stored its human utterance and then failed left it at
        number ``count``, so that one is read too (and answered by the retry, or kept
        before the next message); one that stored its answer too and then failed left that
        at ``count + 1``, read too where the human one is. Utterances whose ids are not the
        dialog's numbers (a restored backup keeps each utterance's id) are read by their
        ``(dialog_id, seq)`` index instead. ``whole`` False: each read as shown, without
        the fields :data:`AS_SHOWN` leaves out (:meth:`agent.store.base.TurnStore.open_turn`)."""
        if limit <= 0:
            self.keep(dialog_id, count)
            return []
        projection = None if whole else AS_SHOWN
        seqs = range(max(0, count - limit), count + 1)
        # MongoDB reads one more id in the same command; point reads (FerretDB) read it
        # only when an unfinished turn's human utterance is there.
        ids = seqs if self._point_reads else [*seqs, count + 1]
        docs = await self.numbered(dialog_id, ids, projection)
        if self._point_reads and any(doc["seq"] == count for doc in docs):
            docs += await self.numbered(dialog_id, [count + 1], projection)
        docs.sort(key=lambda doc: int(doc["seq"]))
        if [doc["seq"] for doc in docs if doc["seq"] < count] != list(seqs)[:-1]:
            cursor = self._utterances.find(
                {"dialog_id": literal(dialog_id)},
                projection,
                sort=[("seq", DESCENDING)],
                limit=limit + 2,
            )
            docs = list(reversed(await cursor.to_list()))
        if not any(d["seq"] == count and d.get("speaker") == "human" for d in docs):
            docs = [d for d in docs if d["seq"] != count + 1]  # no unfinished turn's answer
        self.keep(dialog_id, max([count - 1, *(int(d["seq"]) for d in docs)]) + 1)
        return docs

    async def free_seq(self, dialog_id: str) -> int:
        """The next utterance number, for a writer outside a turn: one past the highest."""
        cursor = self._utterances.find(
            {"dialog_id": literal(dialog_id)},
            sort=[("seq", DESCENDING)],
            limit=1,
            projection={"seq": 1},
        )
        newest = await cursor.to_list()
        return int(newest[0]["seq"]) + 1 if newest else 0

    async def insert(self, dialog_id: str, utterance: HumanUtterance | BotUtterance) -> int:
        """Insert at the number this turn read, or the next free one; the id follows. A
        number whose id another dialog holds is skipped, without counting as an attempt:
        it is taken for good, and the numbers after it are free."""
        seq = self._next_seqs.pop(dialog_id, None)
        attempts = 0
        while attempts < ATTEMPTS:
            if seq is None:
                seq = await self.free_seq(dialog_id)
            utterance.utt_id = utterance_id(dialog_id, seq)
            try:
                await self._utterances.insert_one(utterance_doc(dialog_id, seq, utterance))
            except DuplicateKeyError:  # taken by a writer outside the queue, or elsewhere
                if not await self.held_elsewhere(dialog_id, seq):
                    attempts += 1
                seq = max(await self.free_seq(dialog_id), seq + 1)
                continue
            self.keep(dialog_id, seq + 1)
            return seq
        raise RuntimeError(f"no free utterance number in dialog {dialog_id} (contention)")
