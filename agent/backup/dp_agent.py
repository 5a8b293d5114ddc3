"""dp-agent's own database read as a backup: ``chorus import --from-dp-agent URL``.

DeepPavlov Agent 2.2.0 (the release Dream runs) keeps its state in five collections:
``user`` (``external_id``, ``profile``, ``attributes``, ``persona``), ``bot``, ``dialog``
(``dialog_id``, ``_human_id``, ``_bot_id``, ``_active``, ``channel_type``, ``attributes``
with its ratings, dates), and ``human_utterance`` / ``bot_utterance`` (each with
``_dialog_id``, the dialog's ObjectId, and ``_in_dialog_id``, its place in the dialog).
This module reads them one dialog at a time and yields the same records a Chorus backup
holds (:mod:`agent.backup.files`), so one importer stores both: idempotently, whole dialog
by whole dialog, into either store.

What is kept: dp-agent's ``dialog_id`` and ``utt_id`` (so its clients' ids keep working),
every utterance field as dp-agent wrote it (a hypothesis keeps exactly the fields its skill
returned), the profile with all of dp-agent's ``USER_PROFILE`` keys, the attributes and
ratings. dp-agent's dates are naive local times of its host; they are read as UTC, as
dp-agent's own API shows them. Values only BSON has become JSON: an ObjectId its hex
string, a date inside free-form data dp-agent's date string (its ratings' ``datetime``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from bson import ObjectId
from bson.decimal128 import Decimal128
from pydantic import ValidationError
from pymongo import ASCENDING, AsyncMongoClient
from pymongo.errors import PyMongoError

from agent.backup.files import BackupError, DialogData, DialogRecord, UserRecord
from agent.state.dp_agent import dp_date
from agent.state.models import Bot, BotUtterance, Human, HumanUtterance, Hypothesis
from agent.store.base import StoreUnavailable

Doc = dict[str, Any]
#: dp-agent 2.2.0's collection names.
USERS, BOTS, DIALOGS = "user", "bot", "dialog"
HUMAN_UTTERANCES, BOT_UTTERANCES = "human_utterance", "bot_utterance"
#: Milliseconds to find the server before the import fails.
_TIMEOUT_MS = 5000


def plain(value: Any) -> Any:
    """A BSON value as JSON: ObjectIds as hex, dates in dp-agent's form, big numbers as
    numbers; mappings and lists through and through."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, datetime):
        return dp_date(_utc(value))
    if isinstance(value, Decimal128):
        return float(value.to_decimal())
    return value


def _utc(moment: Any) -> datetime:
    """A date dp-agent stored, in UTC; anything else stored where a date belongs makes the
    dialog unreadable (a ValueError: it is skipped, and named)."""
    if not isinstance(moment, datetime):
        raise ValueError(f"{_shown(moment)} is where a date belongs")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _created(object_id: Any) -> datetime:
    """When dp-agent made a document, which its ObjectId tells: the start of a dialog that
    has no date of its own. An ``_id`` of another type tells nothing (a ValueError)."""
    if not isinstance(object_id, ObjectId):
        raise ValueError(
            f"it has no date_start, and its _id {_shown(object_id)} is no ObjectId to "
            "tell when it began"
        )
    return _utc(object_id.generation_time)


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 42 else shown[:39] + "..."


def _dict(value: Any) -> dict[str, Any]:
    converted = plain(value)
    return converted if isinstance(converted, dict) else {}


def _hypothesis(raw: Any) -> Hypothesis:
    """A hypothesis as its skill returned it (dp-agent adds ``skill_name`` and empty
    ``annotations``); a missing text or confidence, which dp-agent accepted, reads as empty
    and 0."""
    fields = _dict(raw)
    fields.setdefault("skill_name", "")
    fields.setdefault("text", "")
    fields.setdefault("confidence", 0.0)
    return Hypothesis.model_validate(fields)


def _human_utterance(doc: Doc) -> HumanUtterance:
    return HumanUtterance(
        utt_id=str(doc.get("utt_id") or doc["_id"]),
        text=str(doc.get("text") or ""),
        user=_dict(doc.get("user")),
        date_time=_utc(doc["date_time"]),
        attributes=_dict(doc.get("attributes")),
        annotations=_dict(doc.get("annotations")),
        hypotheses=[_hypothesis(h) for h in doc.get("hypotheses") or []],
    )


def _bot_utterance(doc: Doc) -> BotUtterance:
    return BotUtterance(
        utt_id=str(doc.get("utt_id") or doc["_id"]),
        text=str(doc.get("text") or ""),
        orig_text=doc.get("orig_text"),
        active_skill=str(doc.get("active_skill") or ""),
        confidence=float(doc.get("confidence") or 0.0),
        user=_dict(doc.get("user")),
        date_time=_utc(doc["date_time"]),
        attributes=_dict(doc.get("attributes")),
        annotations=_dict(doc.get("annotations")),
    )


def _human(doc: Doc) -> Human:
    return Human(
        id=str(doc["_id"]),
        user_external_id=str(doc["external_id"]),
        attributes=_dict(doc.get("attributes")),
        persona=_dict(doc.get("persona")),
        profile=_dict(doc.get("profile")),  # validated as Profile
    )


def _why(exc: Exception) -> str:
    """What is wrong with a dialog dp-agent stored, in one sentence."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    if isinstance(exc, KeyError):
        return f"no field {exc}"
    return str(exc)


class DpAgentSource:
    """A dp-agent database (``mongodb://host/dp_agent``), read dialog by dialog."""

    def __init__(self, url: str) -> None:
        #: dialogs that could not be read (their id, and why): skipped, the rest imported
        self.skipped: list[tuple[str, str]] = []
        self._client: AsyncMongoClient[Doc] = AsyncMongoClient(
            url, tz_aware=True, tzinfo=UTC, serverSelectionTimeoutMS=_TIMEOUT_MS
        )
        self._db = self._client.get_default_database("dp_agent")

    async def close(self) -> None:
        await self._client.close()

    async def count_dialogs(self) -> int:
        try:
            names = set(await self._db.list_collection_names())
            if DIALOGS not in names:
                raise BackupError(
                    f"database {self._db.name!r} has no {DIALOGS!r} collection: is it "
                    "dp-agent's? (name it in the URL: mongodb://host:27017/<database>)"
                )
            return await self._db[DIALOGS].count_documents({})
        except PyMongoError as exc:
            raise StoreUnavailable(f"dp-agent's database: {exc}") from exc

    async def records(self) -> AsyncIterator[UserRecord | DialogRecord]:
        """Each user before their first dialog, and each dialog, in the order dp-agent
        created them (by ``_id``). Only the user ids seen are kept in memory."""
        seen: set[Any] = set()
        try:
            async for head in self._db[DIALOGS].find(sort=[("_id", ASCENDING)]):
                user = await self._db[USERS].find_one({"_id": head.get("_human_id")})
                if user is None:
                    continue  # a dialog whose user is gone: dp-agent cannot show it either
                try:
                    human = _human(user) if user["_id"] not in seen else None
                    dialog = await self._dialog(head, str(user["external_id"]))
                except (ValidationError, KeyError, TypeError, ValueError, AttributeError) as exc:
                    self.skipped.append((str(head.get("dialog_id") or head["_id"]), _why(exc)))
                    continue
                if human is not None:
                    seen.add(user["_id"])
                    yield UserRecord(user=human)
                yield dialog
        except PyMongoError as exc:
            raise StoreUnavailable(f"dp-agent's database: {exc}") from exc

    async def _dialog(self, head: Doc, user_id: str) -> DialogRecord:
        utterances: list[tuple[int, HumanUtterance | BotUtterance]] = []
        async for doc in self._db[HUMAN_UTTERANCES].find({"_dialog_id": head["_id"]}):
            utterances.append((int(doc.get("_in_dialog_id", 0)), _human_utterance(doc)))
        async for doc in self._db[BOT_UTTERANCES].find({"_dialog_id": head["_id"]}):
            utterances.append((int(doc.get("_in_dialog_id", 0)), _bot_utterance(doc)))
        utterances.sort(key=lambda pair: pair[0])
        bot_doc = await self._db[BOTS].find_one({"_id": head.get("_bot_id")}) or {}
        bot = Bot(
            id=str(bot_doc.get("_id") or head.get("_bot_id") or ""),
            attributes=_dict(bot_doc.get("attributes")),
            persona=_dict(bot_doc.get("persona")),
        )
        active = bool(head.get("_active"))
        ordered = [utterance for _, utterance in utterances]
        start = head.get("date_start") or (ordered[0].date_time if ordered else None)
        finish = head.get("date_finish")
        data = DialogData(
            dialog_id=str(head.get("dialog_id") or head["_id"]),
            channel_type=str(head.get("channel_type") or "http_client"),
            date_start=_utc(start) if start is not None else _created(head["_id"]),
            # Chorus marks the open dialog by having no end (dp-agent sets one every turn)
            date_finish=None if active or finish is None else _utc(finish),
            bot=bot,
            utterances=ordered,
            attributes=_dict(head.get("attributes")),
            dp_agent_id=str(head["_id"]) if isinstance(head["_id"], ObjectId) else None,
        )
        return DialogRecord(user_id=user_id, active=active, dialog=data)
