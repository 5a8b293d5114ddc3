"""Documents ↔ models: what a user, a dialog and an utterance look like stored."""

from __future__ import annotations

import time
import uuid

from pydantic import TypeAdapter

from agent.state.models import BotUtterance, Human, HumanUtterance, Utterance
from agent.store.base import DialogHead
from agent.store.mongo.codec import _escape, _literal, _unescape
from agent.store.mongo.errors import Doc

_utterance: TypeAdapter[Utterance] = TypeAdapter(Utterance)


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
