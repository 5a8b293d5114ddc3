"""DeepPavlov Agent's forms of ids and dates, for its clients and tools.

dp-agent keeps dialogs in MongoDB and shows two ids for each: ``dialog_id`` (32 hex
characters) and ``_id``, the document's 24-hex ObjectId; ``GET /api/dialogs/{id}`` takes
either. Chorus's dialog ids are 32-hex already; the ObjectId is derived, never stored:
the dialog's start as the ObjectId's 4-byte timestamp (as MongoDB's own ObjectIds begin)
and the first 16 hex digits of the dialog id. So any dialog, old or new, on either store,
has one, and a store finds it by the prefix (:data:`OBJECT_ID_PREFIX` digits) of its id.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

from agent.state.models import Profile

#: How dp-agent writes dates in its JSON (``str(datetime)``; Dream's ``utils/dumper``
#: parses ``date_finish`` with it). The fraction is always written, which dp-agent's
#: ``str()`` leaves out on a whole second (and the dumper then fails).
DATE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"

#: dp-agent's ``USER_PROFILE``: every profile it shows has these keys (null when unknown).
USER_PROFILE: dict[str, Any] = {
    "name": None,
    "gender": None,
    "birthdate": None,
    "location": None,
    "home_coordinates": None,
    "work_coordinates": None,
    "occupation": None,
    "income_per_year": None,
}


def dp_agent_profile(profile: Profile) -> dict[str, Any]:
    """The profile as dp-agent shows it: every ``USER_PROFILE`` key (null when unknown),
    then what is known. Chorus's own ``timezone``, for which dp-agent has no field, only
    once it is set: a Dream client comparing profiles finds no key it never had."""
    known = profile.model_dump(exclude={"timezone"} if profile.timezone is None else None)
    return {**USER_PROFILE, **known}


#: How many leading hex digits of the dialog id an ObjectId carries.
OBJECT_ID_PREFIX = 16
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{24}$")


def dp_date(moment: datetime) -> str:
    """A stored (aware, UTC) date as dp-agent writes it: naive UTC, with microseconds."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.strftime(DATE_FORMAT)


def is_object_id(value: str) -> bool:
    """Whether ``value`` has the form of dp-agent's ``_id`` (24 hex digits)."""
    return _OBJECT_ID.match(value) is not None


def object_id(dialog_id: str, date_start: datetime) -> str:
    """The dialog's dp-agent ``_id``: its start (seconds since the epoch, 8 hex digits) and
    the first :data:`OBJECT_ID_PREFIX` hex digits of its id. An id that is not 32-hex
    (none that Chorus makes) gets a hash instead, which is shown but cannot be looked up."""
    seconds = int(date_start.timestamp()) & 0xFFFFFFFF
    tail = dialog_id if _HEX32.match(dialog_id) else hashlib.sha256(dialog_id.encode()).hexdigest()
    return f"{seconds:08x}{tail[:OBJECT_ID_PREFIX]}"


def dialog_id_prefix(value: str) -> str:
    """The part of a dialog id an ObjectId carries (lower case, as Chorus's ids are)."""
    return value[8:].lower()


def short_id(entity_id: str) -> str:
    """A user's or a bot's id in ObjectId form (dp-agent shows ``str(ObjectId)``): the
    first 24 hex digits of Chorus's 32-hex id, or a hash of any other id."""
    if _HEX32.match(entity_id):
        return entity_id[:24]
    return hashlib.sha256(entity_id.encode()).hexdigest()[:24]
