"""A dialog as DeepPavlov Agent shows it (``Dialog.to_dict()`` in its ``state_schema``).

What dp-agent's clients and Dream's tools (``utils/dumper``) read: ``_id`` (24 hex),
``_active`` (``"True"``/``"False"``, a string as dp-agent writes it), top-level
``human_utterances`` and ``bot_utterances`` besides ``utterances``, dates as
``"YYYY-MM-DD HH:MM:SS.ffffff"`` (naive UTC), ``date_start``/``date_finish`` from the first
and last utterance (dp-agent sets them on every save, so an open dialog has a
``date_finish`` too), the profile with every ``USER_PROFILE`` key and
``attributes.pipeline``. Chorus's own fields (errors, trace, skill selection, the numeric
rating) stay in Chorus's dialect (``?view=chorus``); this one has dp-agent's fields only. What
a dp-agent pipeline keeps on a human utterance because Chorus never rewrites an earlier
record is shown where dp-agent keeps it: the annotations ``add_annotation_prev_bot_utt``
made of the previous bot utterance on that utterance, and the utterance counts not at all.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agent.dream.dialog import COUNTS_KEY, PREV_BOT_ANNOTATIONS_KEY
from agent.state.dp_agent import dp_agent_profile, dp_date, object_id, short_id
from agent.state.models import Bot, BotUtterance, Dialog, Human, HumanUtterance


def _human(human: Human) -> dict[str, Any]:
    return {
        "id": short_id(human.id),
        "user_external_id": human.user_external_id,
        "persona": human.persona,
        "profile": dp_agent_profile(human.profile),
        "attributes": human.attributes,
        "user_type": "human",
    }


def _bot(bot: Bot) -> dict[str, Any]:
    return {
        "id": short_id(bot.id),
        "persona": bot.persona,
        "attributes": bot.attributes,
        "user_type": "bot",
    }


def _snapshot(stored: dict[str, Any], model: type[Human] | type[Bot], now: Any) -> dict[str, Any]:
    """The utterance's ``user`` in dp-agent's form: the profile stored with it, or the
    dialog's current one when it cannot be read as a profile (dp-agent always has one)."""
    try:
        if model is Human:
            return _human(Human.model_validate(stored))
        return _bot(Bot.model_validate(stored))
    except ValidationError:
        return dict(now)


def _human_utterance(utterance: HumanUtterance, human: dict[str, Any]) -> dict[str, Any]:
    return {
        "utt_id": utterance.utt_id,
        "text": utterance.text,
        "user": _snapshot(utterance.user, Human, human),
        "annotations": utterance.annotations,
        "hypotheses": [h.model_dump(mode="json") for h in utterance.hypotheses],
        "date_time": dp_date(utterance.date_time),
        "attributes": {
            k: v for k, v in utterance.attributes.items() if k not in _KEPT_FOR_DP_AGENT
        },
    }


#: Human utterance attributes a dp-agent pipeline keeps for Chorus (:mod:`agent.dream.dialog`).
_KEPT_FOR_DP_AGENT = frozenset({COUNTS_KEY, PREV_BOT_ANNOTATIONS_KEY})


def _bot_utterance(
    utterance: BotUtterance, bot: dict[str, Any], following: HumanUtterance | None
) -> dict[str, Any]:
    annotations = utterance.annotations
    later = following.attributes.get(PREV_BOT_ANNOTATIONS_KEY) if following else None
    if isinstance(later, dict) and later:
        annotations = {**annotations, **later}
    return {
        "utt_id": utterance.utt_id,
        "text": utterance.text,
        "orig_text": utterance.orig_text,
        "active_skill": utterance.active_skill,
        "confidence": utterance.confidence,
        "annotations": annotations,
        "date_time": dp_date(utterance.date_time),
        "user": _snapshot(utterance.user, Bot, bot),
        "attributes": utterance.attributes,
    }


def _arm(dialog: Dialog) -> dict[str, str]:
    """The dialog's experiment arm as a dialog attribute (dp-agent's tools read attributes
    and know no field for it); none for a dialog opened with no experiment."""
    return {"arm": dialog.arm} if dialog.arm is not None else {}


def dp_agent_dialog(dialog: Dialog, pipeline: list[str]) -> dict[str, Any]:
    """The dialog as dp-agent's ``GET /api/dialogs/{id}`` answers it; ``pipeline`` is the
    running pipeline's service names (dp-agent keeps them as ``attributes.pipeline``)."""
    human = _human(dialog.human)
    bot = _bot(dialog.bot)
    stored = dialog.utterances
    utterances = []
    for index, utterance in enumerate(stored):
        if isinstance(utterance, HumanUtterance):
            utterances.append(_human_utterance(utterance, human))
            continue
        following = stored[index + 1] if index + 1 < len(stored) else None
        after = following if isinstance(following, HumanUtterance) else None
        utterances.append(_bot_utterance(utterance, bot, after))
    first = dialog.utterances[0].date_time if dialog.utterances else dialog.date_start
    last = dialog.utterances[-1].date_time if dialog.utterances else dialog.date_start
    return {
        "_id": dialog.dp_agent_id or object_id(dialog.dialog_id, dialog.date_start),
        "dialog_id": dialog.dialog_id,
        "utterances": utterances,
        "human_utterances": [u for u in utterances if "hypotheses" in u],
        "bot_utterances": [u for u in utterances if "active_skill" in u],
        "human": human,
        "bot": bot,
        "channel_type": dialog.channel_type,
        "date_start": dp_date(first),
        "date_finish": dp_date(last),
        "_active": str(dialog.date_finish is None),
        "attributes": {"pipeline": pipeline, **_arm(dialog), **dialog.attributes},
    }
