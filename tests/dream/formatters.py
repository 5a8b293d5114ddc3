"""Formatters in Dream's style, imported by the agent by dotted name
(``tests.dream.formatters:last_utt``) as dp-agent imports ``state_formatters``."""

from __future__ import annotations

from typing import Any


def last_utt(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """Like Dream's ``last_utt_dialog``: the newest human text, under ``sentences``."""
    return [{"sentences": [dialog["human_utterances"][-1]["text"]]}]


def eliza_like(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """Like Dream's ``eliza_formatter_dialog``: the corrected text and the human history."""
    last = dialog["human_utterances"][-1]
    text = last["annotations"].get("spelling", last["text"])
    history = [u["text"] for u in dialog["human_utterances"]]
    return [{"last_utterance_batch": [text], "human_utterance_history_batch": [history]}]


def dff_like(dialog: dict[str, Any], skill: str = "counter") -> list[dict[str, Any]]:
    """Like Dream's ``dff_formatter``: ``len(human_utterances) - 1`` is the turn's index, and
    the skill's state comes from the human attributes."""
    attributes = dialog["human"]["attributes"]
    return [
        {
            "human_utter_index_batch": [len(dialog["human_utterances"]) - 1],
            "utterances_count_batch": [len(dialog["utterances"])],
            "window_batch": [[u["text"] for u in dialog["utterances"]]],
            f"{skill}_state_batch": [attributes.get(f"{skill}_state", {})],
            "dialog_id_batch": [dialog["dialog_id"]],
            "profile_batch": [dialog["human"]["profile"]],
        }
    ]


def previous_hypotheses(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """The texts of the previous human utterance's hypotheses (``-``: none), as a formatter
    that reads the history whole sees them."""
    humans = dialog["human_utterances"]
    texts = [h["text"] for h in humans[-2]["hypotheses"]] if len(humans) > 1 else []
    return [{"sentences": [" | ".join(texts) or "-"]}]


def full_dialog(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """Dream's ``full_dialog``: the whole dict, under ``dialogs``."""
    return [{"dialogs": [dialog]}]


def hypotheses_list(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """Dream's ``hypotheses_list``: every hypothesis' text, in one request."""
    return [{"sentences": [h["text"] for h in dialog["human_utterances"][-1]["hypotheses"]]}]


def one_task_per_hypothesis(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """One request per hypothesis: the i-th answer annotates the i-th hypothesis."""
    return [{"sentences": [h["text"]]} for h in dialog["human_utterances"][-1]["hypotheses"]]


def last_bot(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """The bot's newest utterance (the one of this turn, for response annotators)."""
    return [{"sentences": [dialog["bot_utterances"][-1]["text"]]}]


def previous_bot(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """The previous turn's bot utterance, or nothing to do on the first turn."""
    bots = dialog["bot_utterances"]
    return [{"sentences": [bots[-1]["text"]]}] if bots else []


def prefixed(dialog: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """A formatter taking keyword arguments: ``{"name": ..., "prefix": ...}`` in the config."""
    return [{"sentences": [prefix + dialog["human_utterances"][-1]["text"]]}]


def simple(payload: Any) -> Any:
    """Dream's ``simple_formatter_service``: the answer as it is."""
    return payload


def skill_pair(payload: Any) -> list[dict[str, Any]]:
    """Dream's ``base_skill_formatter``: ``[text, confidence]`` becomes one hypothesis."""
    return [{"text": payload[0], "confidence": payload[1]}]


def skill_with_attributes(payload: Any) -> list[dict[str, Any]]:
    """``[text, confidence, human_attributes, bot_attributes, attributes]``."""
    text, confidence, human, bot, extra = payload
    return [
        {
            "text": text,
            "confidence": confidence,
            "human_attributes": human,
            "bot_attributes": bot,
            **extra,
        }
    ]


def broken(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    raise KeyError("no such annotation")


def text_and_image(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest human text and its ``image`` attribute (as Dream's image captioning and
    multimodal formatters read a photo dp-agent's Telegram channel sent)."""
    human = dialog["human_utterances"][-1]
    return [{"sentences": [human["text"]], "image": [human["attributes"].get("image")]}]
