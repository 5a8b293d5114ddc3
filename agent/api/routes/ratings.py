"""Ratings of a dialog or of one bot answer, as DeepPavlov Agent takes them.

As dp-agent does, a rating is appended to the rated dialog's or utterance's
``attributes.ratings`` as ``{"rating", "user_external_id", "datetime"}``, whatever its value
("good", 5, a dict); ``user_id`` may be left out (it is then null). With a ``user_id``, the
dialog must be that user's (404 otherwise, as for Chorus's numeric rating): a user rates
their own dialogs; a rater that is not the dialog's user sends none. Chorus's numeric
``rating`` field is set too when the rating is a number from -1000 to 1000 sent with the
user's id, so Chorus's typed API keeps working.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, HTTPException, status

from agent.api.deps import JsonBody, SettingsDep, StoreDep
from agent.api.limits import attributes_or_422, check_user_id
from agent.api.routes.dialogs import resolve_dialog_id
from agent.api.schemas import DialogRating, Ok, UtteranceRating
from agent.api.security import ChatKey
from agent.settings import Settings
from agent.state.dp_agent import dp_date
from agent.state.models import utc_now

router = APIRouter(prefix="/rating", tags=["ratings"], dependencies=[ChatKey, JsonBody])


def _entry(body: DialogRating | UtteranceRating, settings: Settings) -> dict[str, Any]:
    """dp-agent's stored form of a rating (its ``datetime`` in dp-agent's date form)."""
    if body.user_id is not None:
        check_user_id(body.user_id, settings.max_user_id_length)
    entry = {
        "rating": body.rating,
        "user_external_id": body.user_id,
        "datetime": dp_date(utc_now()),
    }
    return attributes_or_422(lambda: entry, settings.client_limits())


def _missing(what: str, rated: str, body: DialogRating | UtteranceRating) -> str:
    if body.user_id is None:
        return f"no {what} {rated!r}"
    return f"user {body.user_id!r} has no {what} {rated!r}"


def _numeric(body: DialogRating | UtteranceRating) -> float | None:
    """The rating as Chorus's numeric rating, when it is one sent with the user's id."""
    value = body.rating
    if body.user_id is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and -1000 <= value <= 1000 else None


@router.post("/dialog", response_model=Ok)
async def rate_dialog(body: DialogRating, store: StoreDep, settings: SettingsDep) -> Ok:
    entry = _entry(body, settings)
    dialog_id = await resolve_dialog_id(store, body.dialog_id)
    if dialog_id is None or not await store.add_dialog_rating(
        dialog_id, entry, body.user_id, _numeric(body)
    ):
        raise HTTPException(status.HTTP_404_NOT_FOUND, _missing("dialog", body.dialog_id, body))
    return Ok()


@router.post("/utterance", response_model=Ok)
async def rate_utterance(body: UtteranceRating, store: StoreDep, settings: SettingsDep) -> Ok:
    entry = _entry(body, settings)
    if not await store.add_utterance_rating(body.utt_id, entry, body.user_id, _numeric(body)):
        raise HTTPException(status.HTTP_404_NOT_FOUND, _missing("bot utterance", body.utt_id, body))
    return Ok()
