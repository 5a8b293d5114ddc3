"""Ratings of a dialog or of one bot answer, as DeepPavlov Agent takes them.

As dp-agent does, a rating is appended to the rated dialog's or utterance's
``attributes.ratings`` as ``{"rating", "user_external_id", "datetime"}``, whatever its value
("good", 5, a dict); ``user_id`` may be left out (it is then null). With a ``user_id``, the
dialog must be that user's (404 otherwise, as for Chorus's numeric rating): a user rates
their own dialogs; a rater that is not the dialog's user sends none. Chorus's numeric
``rating`` field is set too when the rating is a number from -1000 to 1000 sent with the
user's id, so Chorus's typed API keeps working.

Unlike dp-agent, both are bounded, so that ratings cannot grow a dialog without end: a
rating is at most ``MAX_RATING_BYTES`` as JSON (422 past it), and a dialog or a bot
answer keeps at most ``MAX_RATINGS`` (409 past it: a stored rating is never dropped
to make room).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, HTTPException, status

from agent.api.deps import JsonBody, MetricsDep, RatingsDep, ReaderDep, SettingsDep
from agent.api.request_limits import attributes_or_422, check_user_id
from agent.api.routes.dialogs import resolve_dialog_id
from agent.api.schemas import DialogRating, Ok, UtteranceRating
from agent.api.security import ChatKey
from agent.metrics import Metrics
from agent.settings import Settings
from agent.state.dp_agent import dp_date
from agent.state.models import utc_now
from agent.store.base import DialogReader, RatingsFull

router = APIRouter(prefix="/rating", tags=["ratings"], dependencies=[ChatKey, JsonBody])


def _entry(body: DialogRating | UtteranceRating, settings: Settings) -> dict[str, Any]:
    """dp-agent's stored form of a rating (its ``datetime`` in dp-agent's date form); a
    rating over ``MAX_RATING_BYTES`` gets a 422 that gives the limit."""
    if body.user_id is not None:
        check_user_id(body.user_id, settings.limits.max_user_id_length)
    try:
        size = settings.limits.for_client(settings.max_body_bytes).measure(body.rating, "rating")
    except ValueError as exc:  # UnstorableValue: too deep, NaN, ...
        raise HTTPException(422, str(exc)) from None
    if size > settings.limits.max_rating_bytes:
        raise HTTPException(
            422,
            f"rating is about {size} bytes as JSON; the limit is "
            f"{settings.limits.max_rating_bytes} (MAX_RATING_BYTES)",
        )
    entry = {
        "rating": body.rating,
        "user_external_id": body.user_id,
        "datetime": dp_date(utc_now()),
    }
    return attributes_or_422(lambda: entry, settings.limits.for_client(settings.max_body_bytes))


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


async def _count(
    metrics: Metrics, store: DialogReader, dialog_id: str | None, rating: float | None
) -> None:
    """A numeric rating counted on its dialog's experiment arm (read only when there is an
    experiment to count it for)."""
    if rating is None or dialog_id is None or not metrics.experimenting:
        return
    dialog = await store.dialog(dialog_id)
    metrics.observe_rating(rating, dialog.arm if dialog else None)


@router.post("/dialog", response_model=Ok)
async def rate_dialog(
    body: DialogRating,
    store: ReaderDep,
    ratings: RatingsDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Ok:
    entry = _entry(body, settings)
    dialog_id = await resolve_dialog_id(store, body.dialog_id)
    try:
        rated = dialog_id is not None and await ratings.add_dialog_rating(
            dialog_id, entry, body.user_id, _numeric(body), settings.limits.max_ratings
        )
    except RatingsFull as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    if not rated:
        raise HTTPException(status.HTTP_404_NOT_FOUND, _missing("dialog", body.dialog_id, body))
    await _count(metrics, store, dialog_id, _numeric(body))
    return Ok()


@router.post("/utterance", response_model=Ok)
async def rate_utterance(
    body: UtteranceRating,
    store: ReaderDep,
    ratings: RatingsDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Ok:
    entry = _entry(body, settings)
    try:
        rated = await ratings.add_utterance_rating(
            body.utt_id, entry, body.user_id, _numeric(body), settings.limits.max_ratings
        )
    except RatingsFull as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    if not rated:
        raise HTTPException(status.HTTP_404_NOT_FOUND, _missing("bot utterance", body.utt_id, body))
    if _numeric(body) is not None and metrics.experimenting:
        dialogs = await store.utterance_dialogs([body.utt_id])
        await _count(metrics, store, dialogs.get(body.utt_id), _numeric(body))
    return Ok()
