"""Ratings of a dialog or of one bot answer, as DeepPavlov Agent takes them."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from agent.api.deps import JsonBody, StoreDep
from agent.api.schemas import DialogRating, Ok, UtteranceRating
from agent.api.security import ChatKey

router = APIRouter(prefix="/rating", tags=["ratings"], dependencies=[ChatKey, JsonBody])


@router.post("/dialog", response_model=Ok)
async def rate_dialog(body: DialogRating, store: StoreDep) -> Ok:
    if not await store.rate_dialog(body.user_id, body.dialog_id, body.rating):
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"user {body.user_id!r} has no dialog {body.dialog_id!r}"
        )
    return Ok()


@router.post("/utterance", response_model=Ok)
async def rate_utterance(body: UtteranceRating, store: StoreDep) -> Ok:
    if not await store.rate_utterance(body.user_id, body.utt_id, body.rating):
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"user {body.user_id!r} has no bot utterance {body.utt_id!r}"
        )
    return Ok()
