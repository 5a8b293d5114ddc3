"""``POST /api/v1/chat``: a ParlAI observation in, a ParlAI act out."""

from __future__ import annotations

import base64
import binascii
import re

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import Response

from agent.api.chat_turn import incoming
from agent.api.deps import (
    DoubleTextingPolicy,
    FlowDep,
    IdempotencyKey,
    JsonBody,
    SettingsDep,
)
from agent.api.schemas import Act, Observation
from agent.api.security import ChatKey
from agent.api.sse import stream_turn, wants_events
from agent.flow import Answer
from agent.message import Message
from agent.parlai.scores import TurnScores, rank_label_candidates
from agent.settings import Settings
from agent.state.handoff import HANDOFF_SKILL

router = APIRouter(prefix="/api/v1", tags=["chat"])

_DATA_URL = re.compile(r"^data:[\w/+.-]+;base64,", re.ASCII)


def _check_image(image: str, settings: Settings) -> None:
    """An http(s) URL, or base64 (optionally a data: URL) no larger than the limit."""
    if len(image) > settings.limits.max_image_bytes * 4 // 3 + 64:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"image is over the {settings.limits.max_image_bytes} bytes limit "
            "(MAX_IMAGE_BYTES); send a URL instead",
        )
    if image.startswith(("http://", "https://")):
        return
    try:
        base64.b64decode(_DATA_URL.sub("", image), validate=True)
    except (binascii.Error, ValueError):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            "image must be an http(s) URL or base64 data (optionally as a data: URL)",
        ) from None


@router.post(
    "/chat", dependencies=[ChatKey, JsonBody], response_model=Act, response_model_exclude_none=True
)
async def observe(
    observation: Observation,
    flow: FlowDep,
    settings: SettingsDep,
    key: IdempotencyKey,
    double_texting: DoubleTextingPolicy,
    request: Request,
) -> Act | Response:
    """Answer an observation. ``episode_done`` closes the dialog after the answer;
    ``reward`` rates the previous answer; with ``eval_labels`` (or ``labels``) the act
    carries the turn's metrics. With ``Accept: text/event-stream`` the answer is the
    turn's events, the act last (``answer``)."""
    if observation.image is not None:
        _check_image(observation.image, settings)
    turn = incoming(
        settings,
        observation,
        endpoint="observe",
        user_id=observation.user_id,
        text=observation.text,
        text_field="text",
        attributes=observation.attributes,
        key=key,
        message_id=observation.message_id,
        reward=observation.reward,
        close_after=observation.episode_done,
        double_texting=double_texting,
    )
    if wants_events(request):
        return await stream_turn(
            request,
            flow,
            turn,
            lambda answer: act(observation, answer).model_dump(mode="json", exclude_none=True),
        )
    return act(observation, await flow.reply(turn))


def act(observation: Observation, answer: Answer) -> Act:
    """The flow's answer as ParlAI's act, with the turn's metrics when ``observation``
    carries labels."""
    result = answer.result
    if result is None:  # no closing commands here: the dialog is with a person
        assert answer.kept is not None and answer.dialog_id is not None
        return Act(
            text="",
            id=HANDOFF_SKILL,
            text_candidates=[],
            episode_done=observation.episode_done,
            dialog_id=answer.dialog_id,
            utt_id=answer.kept,
        )
    ranked = result.ranked_texts()
    labels = observation.eval_labels or observation.labels
    scores = None
    if labels:
        candidates = (
            rank_label_candidates(observation.label_candidates, ranked)
            if observation.label_candidates
            else ranked
        )
        scores = TurnScores.score(result.bot_utterance.text, candidates, labels)
    shaped = Act(
        text=result.bot_utterance.text,
        id=result.bot_utterance.active_skill,
        text_candidates=ranked,
        episode_done=observation.episode_done,
        dialog_id=answer.dialog_id,
        utt_id=result.bot_utterance.utt_id,
        metrics=scores,
    )
    # As ParlAI sends every act to a client: JSON-safe, internal fields left out.
    return Act.model_validate(Message(shaped.model_dump()).json_safe_payload())
