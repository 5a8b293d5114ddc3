"""The dialog dict dp-agent hands to formatters, built from Chorus's bounded window.

dp-agent loads the whole dialog into memory on every turn; Chorus reads the last
``history_window`` utterances only. The three utterance lists hold that window, but their
``len()`` is the dialog's true count (:class:`CountedList`), because Dream's formatters use
it as an index (``dff_formatter``: ``len(dialog["human_utterances"]) - 1`` is the turn's
number). The counts are carried forward on each human utterance (:data:`COUNTS_KEY`), so a
turn knows them without reading the history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent.state.dp_agent import USER_PROFILE, dp_agent_profile
from agent.state.models import Bot, BotUtterance, Human, HumanUtterance, Utterance

#: Where a human utterance keeps how many utterances (human and bot) came before it.
COUNTS_KEY = "_dp_agent_counts"
#: Where a human utterance keeps the annotations ``add_annotation_prev_bot_utt`` made of the
#: bot utterance before it (Chorus never rewrites an earlier turn's records).
PREV_BOT_ANNOTATIONS_KEY = "_prev_bot_annotations"
#: Utterance attributes formatters never see (the labels, as in agent/pipeline/views.py).
HIDDEN_ATTRIBUTES = frozenset({COUNTS_KEY, PREV_BOT_ANNOTATIONS_KEY, "eval_labels", "skill_labels"})

#: dp-agent's ``USER_PROFILE``: the fields ``update_human`` writes to the profile.
PROFILE_FIELDS = tuple(USER_PROFILE)


class CountedList(list[Any]):
    """A window of a longer list: indexing, slicing and iteration see the window (newest
    last), ``len()`` the whole list's length."""

    __slots__ = ("total",)

    def __init__(self, items: Iterable[Any] = (), total: int | None = None) -> None:
        super().__init__(items)
        self.total = max(total if total is not None else 0, list.__len__(self))

    def __len__(self) -> int:
        return self.total

    def __bool__(self) -> bool:
        return self.total > 0

    def __reduce_ex__(self, protocol: Any) -> Any:  # deepcopy / pickle keep the count
        return (CountedList, (list(self), self.total))


Counts = dict[str, int]


def _counts_of(utterance: Utterance) -> Counts | None:
    if not isinstance(utterance, HumanUtterance):
        return None
    counts = utterance.attributes.get(COUNTS_KEY)
    if isinstance(counts, dict) and all(
        isinstance(counts.get(k), int) for k in ("utterances", "human", "bot")
    ):
        return {k: int(counts[k]) for k in ("utterances", "human", "bot")}
    return None


def counts_before(history: Sequence[Utterance]) -> Counts:
    """How many utterances, human and bot ones, the dialog had before the new one: from the
    newest counted human utterance of the window and what came after it; without one (a
    dialog begun before the Dream pipeline), the window's own counts."""
    start: Counts = {"utterances": 0, "human": 0, "bot": 0}
    tail: Sequence[Utterance] = history
    for index in range(len(history) - 1, -1, -1):
        counts = _counts_of(history[index])
        if counts is not None:
            start = counts
            tail = history[index:]
            break
    result = dict(start)
    for utterance in tail:
        result["utterances"] += 1
        result["human" if isinstance(utterance, HumanUtterance) else "bot"] += 1
    return result


def _attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    if HIDDEN_ATTRIBUTES.isdisjoint(attributes):
        return dict(attributes)
    return {k: v for k, v in attributes.items() if k not in HIDDEN_ATTRIBUTES}


def human_dict(
    human: Human, attributes: dict[str, Any] | None = None, profile: dict[str, Any] | None = None
) -> dict[str, Any]:
    """dp-agent's ``Human.to_dict()``; the profile has every ``USER_PROFILE`` field."""
    full_profile = dp_agent_profile(human.profile)
    full_profile.update(profile or {})
    return {
        "id": human.id,
        "user_external_id": human.user_external_id,
        "persona": dict(human.persona),
        "profile": full_profile,
        "attributes": dict(human.attributes if attributes is None else attributes),
        "user_type": "human",
    }


def bot_dict(bot: Bot, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": bot.id,
        "persona": dict(bot.persona),
        "attributes": dict(bot.attributes if attributes is None else attributes),
        "user_type": "bot",
    }


def hypothesis_dict(hypothesis: Any) -> dict[str, Any]:
    data: dict[str, Any] = hypothesis.model_dump()
    data["annotations"] = dict(hypothesis.annotations)
    return data


def utterance_dict(
    utterance: Utterance, extra_annotations: dict[str, Any] | None = None
) -> dict[str, Any]:
    """dp-agent's ``to_dict()`` of an utterance (``user`` is the profile at that time)."""
    annotations = dict(utterance.annotations)
    if extra_annotations:
        annotations.update(extra_annotations)
    common: dict[str, Any] = {
        "utt_id": utterance.utt_id,
        "text": utterance.text,
        "user": dict(utterance.user),
        "annotations": annotations,
        "date_time": str(utterance.date_time),
        "attributes": _attributes(utterance.attributes),
    }
    if isinstance(utterance, HumanUtterance):
        common["user"].setdefault("user_type", "human")
        return {**common, "hypotheses": [hypothesis_dict(h) for h in utterance.hypotheses]}
    common["user"].setdefault("user_type", "bot")
    return {
        **common,
        "orig_text": utterance.orig_text,
        "active_skill": utterance.active_skill,
        "confidence": utterance.confidence,
    }


def window_dicts(window: Sequence[Utterance]) -> list[dict[str, Any]]:
    """Each utterance's dict; a bot utterance shows the annotations the next human
    utterance keeps for it (``add_annotation_prev_bot_utt``)."""
    utterances: list[dict[str, Any]] = []
    for index, utterance in enumerate(window):
        extra = None
        following = window[index + 1] if index + 1 < len(window) else None
        if isinstance(utterance, BotUtterance) and isinstance(following, HumanUtterance):
            notes = following.attributes.get(PREV_BOT_ANNOTATIONS_KEY)
            extra = notes if isinstance(notes, dict) else None
        utterances.append(utterance_dict(utterance, extra))
    return utterances


def dialog_dict(
    *,
    dialog_id: str,
    channel_type: str,
    history: Sequence[Utterance],
    turn: Sequence[Utterance],
    counts: Counts,
    human: dict[str, Any],
    bot: dict[str, Any],
    attributes: dict[str, Any] | None = None,
    history_dicts: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The dict a dp-agent formatter is called with: the stored ``history`` window, then
    ``turn`` (this turn's human utterance, and its bot utterance once one is chosen).
    ``counts`` are the dialog's true counts before the turn. ``history_dicts``, the
    history's own dicts made once per turn (they do not change during it), saves building
    them for every call; each call gets its own copy of each."""
    window = [*history, *turn]
    if history_dicts is None:
        utterances = window_dicts(window)
    else:
        last_history = window_dicts([*history[-1:], *turn])[:1] if history else []
        utterances = [*(dict(d) for d in history_dicts[:-1]), *last_history, *window_dicts(turn)]
    human_list = [
        d for d, u in zip(utterances, window, strict=True) if isinstance(u, HumanUtterance)
    ]
    bot_list = [d for d, u in zip(utterances, window, strict=True) if isinstance(u, BotUtterance)]
    new_humans = sum(isinstance(u, HumanUtterance) for u in turn)
    starts_here = counts["utterances"] == len(history)
    return {
        "dialog_id": dialog_id,
        "_id": dialog_id,
        "utterances": CountedList(utterances, counts["utterances"] + len(turn)),
        "human_utterances": CountedList(human_list, counts["human"] + new_humans),
        "bot_utterances": CountedList(bot_list, counts["bot"] + len(turn) - new_humans),
        "human": human,
        "bot": bot,
        "channel_type": channel_type,
        "date_start": str(window[0].date_time) if window and starts_here else "None",
        "date_finish": "None",
        "_active": "True",
        "attributes": dict(attributes or {}),
    }
