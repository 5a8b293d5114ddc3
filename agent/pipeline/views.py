"""What each service is shown: a window of the dialog, built from the state at call time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from agent.sdk.models import BotView, DialogView, HumanView, HypothesisView, UtteranceView
from agent.state.models import Bot, Human, HumanUtterance, Hypothesis, Utterance

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__


def _made(cls: type[M], fields: dict[str, Any]) -> M:
    """``cls.model_construct(**fields)`` for values the agent made itself with every field
    given (nothing to validate, no default to fill, no extra field, no private attribute):
    the instance's parts set directly, as ``model_construct`` sets them, without its walk
    over the model's fields and their defaults. The views are built several dozen times a
    turn (docs/performance.md, "Half the CPU")."""
    model = cls.__new__(cls)
    _set(model, "__dict__", fields)
    _set(model, "__pydantic_fields_set__", set(fields))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


#: Stored with the utterance but never shown to a service: evaluation labels must not
#: feed skills (ParlAI moves ``labels`` to ``eval_labels`` for the same reason), nor the
#: skills an operator says may answer the turn (``chorus replay`` reads ``skill_labels``).
HIDDEN_FROM_SERVICES = frozenset({"eval_labels", "skill_labels"})


def _shown(attributes: dict[str, object]) -> dict[str, object]:
    if HIDDEN_FROM_SERVICES.isdisjoint(attributes):
        return attributes
    return {k: v for k, v in attributes.items() if k not in HIDDEN_FROM_SERVICES}


def _hypothesis_view(h: Hypothesis) -> HypothesisView:
    """The hypothesis as its view holds it (its fields but the attribute merges, and what
    the skill added), made from the validated hypothesis without dumping and validating
    it again."""
    view = _made(
        HypothesisView,
        {
            "skill_name": h.skill_name,
            "text": h.text,
            "confidence": h.confidence,
            "annotations": dict(h.annotations),
        },
    )
    extra = dict(h.__pydantic_extra__ or {})
    _set(view, "__pydantic_extra__", extra)
    view.__pydantic_fields_set__.update(extra)
    return view


def utterance_view(utterance: Utterance, with_hypotheses: bool = False) -> UtteranceView:
    """One utterance as services see it (no profile snapshot, no trace)."""
    if isinstance(utterance, HumanUtterance):
        image = utterance.attributes.get("image")
        return _made(
            UtteranceView,
            {
                "speaker": "human",
                "utt_id": utterance.utt_id,
                "text": utterance.text,
                "annotations": utterance.annotations,
                "attributes": _shown(utterance.attributes),
                "hypotheses": [_hypothesis_view(h) for h in utterance.hypotheses]
                if with_hypotheses
                else [],
                "active_skill": None,
                "image": image if isinstance(image, str) else None,
            },
        )
    return _made(
        UtteranceView,
        {
            "speaker": "bot",
            "utt_id": utterance.utt_id,
            "text": utterance.text,
            "annotations": utterance.annotations,
            "attributes": utterance.attributes,
            "hypotheses": [],
            "active_skill": utterance.active_skill,
            "image": None,
        },
    )


def people(human: Human, bot: Bot) -> tuple[HumanView, BotView]:
    """The user and the bot as services see them: the same through a turn, whose attribute
    merges are written at its end, so made once per turn."""
    return (
        _made(
            HumanView,
            {
                "id": human.id,
                "attributes": human.attributes,
                "profile": human.profile.model_dump(exclude_none=True),
            },
        ),
        _made(BotView, {"id": bot.id, "attributes": bot.attributes, "persona": bot.persona}),
    )


def dialog_view(
    dialog_id: str,
    window: Sequence[Utterance],
    shown_people: tuple[HumanView, BotView],
    context_window: int,
    max_tokens: int | None = None,
    known: Mapping[int, UtteranceView] | None = None,
) -> DialogView:
    """The last ``context_window`` utterances and the profiles' attributes (``shown_people``,
    from :func:`people`); hypotheses are shown on the newest human utterance only (for
    candidate annotators and selectors); ``max_tokens``: what is left of an LLM skill's
    budget. ``known``: views already made of utterances that no longer change, by ``id()``
    (a turn's history: each of its service calls shows them again)."""
    shown = list(window)[-context_window:]
    newest_human = None
    for u in reversed(shown):
        if isinstance(u, HumanUtterance):
            newest_human = u
            break
    views = []
    for u in shown:
        made = None if known is None or u is newest_human else known.get(id(u))
        views.append(made or utterance_view(u, with_hypotheses=u is newest_human))
    human, bot = shown_people
    return _made(
        DialogView,
        {
            "dialog_id": dialog_id,
            "utterances": views,
            "human": human,
            "bot": bot,
            "max_tokens": max_tokens,
        },
    )
