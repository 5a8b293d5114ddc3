"""Documents ↔ models: what a user, a dialog and an utterance look like stored."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

from pydantic import TypeAdapter

from agent.state.models import BotUtterance, Human, HumanUtterance, Utterance
from agent.store.base import DialogHead
from agent.store.mongo.codec import escape, literal, unescape
from agent.store.mongo.errors import Doc

utterance_of: TypeAdapter[Utterance] = TypeAdapter(Utterance)


#: Namespace of the user ids derived from the client's ``user_id``.
_USER_IDS = uuid.UUID("5b0d8c52-8a4f-4c1e-9a57-1f3e6d2c9b70")


def human_id_for(user_id: str) -> str:
    """The user document's ``_id``: a fixed function of the client's ``user_id``, so the
    user is found by ``_id`` (see the package docstring), in the shape of every other id."""
    return uuid.uuid5(_USER_IDS, literal(user_id)).hex


def utterance_id(dialog_id: str, seq: int) -> str:
    """An utterance's id (its document's ``_id``): the dialog's id and the utterance's
    number, so the ids of a dialog's last K utterances are known without reading any
    index, and an utterance is read, rated or replaced by ``_id``."""
    return f"{dialog_id}-{seq}"


def new_user_doc(user_id: str) -> Doc:
    """The document of a user at first contact."""
    human = Human(id=human_id_for(user_id), user_external_id=user_id)
    doc: Doc = escape(human.model_dump())
    doc["_id"] = doc.pop("id")
    return doc


def human_of(doc: Doc) -> Human:
    doc = unescape(doc)
    doc["id"] = doc.pop("_id")
    return Human.model_validate(doc)


def _dialog_key(dialog_id: str) -> str:
    """The dialog's ``active_key``, under a unique index."""
    return "d:" + dialog_id


def dialog_doc(head: DialogHead, *, count: int = 0, active: bool = True) -> Doc:
    doc: Doc = escape(head.model_dump())
    doc["_id"] = doc.pop("dialog_id")
    # opened_ns orders dialogs opened within the same millisecond (BSON dates keep ms).
    doc.update(
        active=active,
        active_key=_dialog_key(head.dialog_id),
        utterance_count=count,
        opened_ns=time.time_ns(),
    )
    return doc


#: The fields of an open dialog that live with its user (``dialog`` on the user's document),
#: where a turn changes them: the dialog's own document holds what they were when it opened
#: until it closes. Every other field of the dialog's document is its own while it is open
#: (a rating is written there, and its start, arm and ids never change).
HELD_BY_THE_USER = ("bot", "attributes")


def closing_update(head: DialogHead, count: int, finish: datetime) -> Doc:
    """The update that closes a dialog's document: its end, its utterance count and
    :data:`HELD_BY_THE_USER` from the user's document, and nothing else. ``head`` is rebuilt
    from the user's document, which never holds the rating (``rating``,
    ``dp_agent_ratings``) written on the dialog's document while it was open: a ``$set`` of
    the whole head would write those over with nothing. The rest of the head is written
    only when the dialog's document is missing (its opening was cut short between the
    user's document and its own), as the opening would have written it."""
    doc = dialog_doc(head, count=count, active=False)
    closing: Doc = {"active": False, "date_finish": finish, "utterance_count": count}
    closing.update({field: doc[field] for field in HELD_BY_THE_USER})
    missing = {k: v for k, v in doc.items() if k not in closing and k not in ("_id", "opened_ns")}
    return {"$set": closing, "$setOnInsert": {**missing, "opened_ns": 0}}


def head_of(doc: Doc) -> DialogHead:
    doc = unescape(doc)
    doc["dialog_id"] = doc.pop("_id")
    return DialogHead.model_validate(doc)  # active, active_key, counters: ignored


def open_dialog_state(head: DialogHead) -> Doc:
    """The open dialog as the user's document holds it (``dialog``): what a turn reads and
    changes (the bot and its attributes, the utterance count) lives with the user, so a
    turn reads and writes one document for both. Its ``dialogs`` document is written when
    it opens and again when it closes."""
    doc: Doc = escape(head.model_dump(exclude={"human_id", "rating", "date_finish"}))
    doc["id"] = doc.pop("dialog_id")
    doc["count"] = 0
    return doc


def open_head_of(user: Doc) -> DialogHead | None:
    """The user's open dialog, from their document; None when none is open."""
    state = user.get("dialog")
    if not isinstance(state, dict):
        return None
    doc = unescape({k: v for k, v in state.items() if k not in ("id", "count")})
    return DialogHead.model_validate({**doc, "dialog_id": state["id"], "human_id": user["_id"]})


def utterance_body(utterance: HumanUtterance | BotUtterance) -> Doc:
    """The utterance's fields as stored; its id is the document's ``_id``."""
    doc: Doc = escape(utterance.model_dump(exclude={"utt_id"}))
    return doc


def utterance_doc(
    dialog_id: str, seq: int, utterance: HumanUtterance | BotUtterance, end: Doc | None = None
) -> Doc:
    """The document inserted for an utterance whose id is already its number's; an answer
    carries its turn's ``end`` (:func:`turn_end_of`)."""
    return {
        "_id": utterance.utt_id,
        "dialog_id": dialog_id,
        "seq": seq,
        **utterance_body(utterance),
        **({TURN_END: end} if end else {}),
    }


#: The field of an answer's document that holds the ``$set`` of its turn's end on the
#: user's document (never read into the model).
TURN_END = "turn_end"
#: The field that marks an answer whose kept end a later turn completed
#: (:func:`~agent.store.mongo.turn_end.complete_end`): its own turn can no longer take it
#: back (never read into the model).
END_TAKEN = "turn_end_taken"


def turn_end_of(changes: Doc) -> Doc | None:
    """What an answer keeps of its turn's end on the user's document: the ``$set`` paths
    (attributes, profile, the bot's attributes) as a list, since paths are no field names.
    Without a transaction, the answer and the user's document are two writes: if only the
    first is stored, the next turn finds the answer and applies this (see
    ``MongoDialogs.open_turn``), so no attribute update is lost and the turn is not run
    again."""
    if not changes:
        return None
    return {"set": [{"path": path, "value": value} for path, value in changes.items()]}


def turn_end_changes(doc: Doc) -> Doc:
    """The ``$set`` an answer's document keeps for its turn's end (empty: none)."""
    end = doc.get(TURN_END)
    if not isinstance(end, dict):
        return {}
    return {item["path"]: item["value"] for item in end.get("set", [])}


def annotated_update(utterance: HumanUtterance) -> Doc:
    """The ``update`` statement that stores the human utterance as the services left it."""
    return {"q": {"_id": literal(utterance.utt_id)}, "u": {"$set": utterance_body(utterance)}}


def utterance_from(doc: Doc) -> Utterance:
    doc = unescape(doc)
    doc["utt_id"] = doc.pop("_id")
    del doc["dialog_id"], doc["seq"]
    doc.pop(TURN_END, None)
    doc.pop(END_TAKEN, None)
    return utterance_of.validate_python(doc)
