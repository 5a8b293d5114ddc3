"""Ratings on MongoDB: a dialog's and a bot utterance's, each one conditional update."""

from __future__ import annotations

from typing import Any

from pymongo.errors import WriteError

from agent.store.base import DialogHead, RatingsFull
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import escape, literal, unescape
from agent.store.mongo.documents import human_id_for
from agent.store.mongo.errors import Doc, unavailable_when_unreachable


class MongoRatings(MongoBase):
    """:class:`agent.store.base.RatingStore` on MongoDB."""

    @unavailable_when_unreachable
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
        query: Doc = {"_id": literal(dialog_id)}
        if user_id is not None:
            query["human_id"] = human_id_for(user_id)
        update: Doc = {"$push": {RATINGS: escape(entry)}}
        if rating is not None:
            update["$set"] = {"rating": rating}
        result = await self._dialogs.update_one({**query, **_room(RATINGS, max_ratings)}, update)
        if (
            result.matched_count == 0
            and max_ratings is not None
            and await self._dialogs.find_one(query, projection={"_id": 1}) is not None
        ):
            raise RatingsFull(f"dialog {dialog_id!r}", max_ratings)
        return result.matched_count > 0

    @unavailable_when_unreachable
    async def add_utterance_rating(
        self,
        utt_id: str,
        entry: dict[str, Any] | None,
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        """A rating of another user's answer and of a missing one send the same commands
        (the user's dialogs, then one update matching the answer and its owner together),
        so the answer's timing does not tell which ids exist."""
        if entry is None and rating is None:
            raise ValueError("a rating needs an entry or a numeric rating")
        owner: Doc = {"_id": literal(utt_id), "speaker": "bot"}
        if user_id is not None:
            owned = await self._dialogs.distinct("_id", {"human_id": human_id_for(user_id)})
            owner["dialog_id"] = {"$in": owned}
        query = {**owner, **_room("attributes.ratings", max_ratings)}
        numeric: Doc = {} if rating is None else {"rating": rating}
        update: Doc = {} if entry is None else {"$push": {"attributes.ratings": escape(entry)}}
        if numeric:
            update["$set"] = numeric
        try:
            result = await self._utterances.update_one(query, update)
        except WriteError:  # a service left a value there that is not a list: keep it first
            doc = await self._utterances.find_one(query, projection={"attributes.ratings": 1})
            if doc is None:
                return False
            kept = doc.get("attributes", {}).get("ratings")
            result = await self._utterances.update_one(
                {**query, "attributes.ratings": kept},
                {"$set": {"attributes.ratings": [kept, escape(entry)], **numeric}},
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
RATINGS = "dp_agent_ratings"


def with_ratings(head: DialogHead, doc: Doc) -> DialogHead:
    """The head with the dialog's dp-agent ratings at the end of ``attributes.ratings``."""
    added = doc.get(RATINGS)
    if not isinstance(added, list) or not added:
        return head
    kept = head.attributes.get("ratings")
    ratings = kept if isinstance(kept, list) else ([] if kept is None else [kept])
    attributes = {**head.attributes, "ratings": [*ratings, *unescape(added)]}
    return head.model_copy(update={"attributes": attributes})
