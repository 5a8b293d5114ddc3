"""dp-agent's ``state_manager_method``\\ s, each writing one of Chorus's confined slots.

One :class:`TurnState` holds a turn in flight: the stored window, this turn's human
utterance (its annotations write-once, as in the Chorus pipeline), the bot utterance once
one is added, and the attribute changes to merge when the turn is stored. A method that
would write outside its slot (an id, a second bot utterance, an annotation written twice)
raises :class:`RefusedOutput`; an answer of the wrong shape :class:`BadServiceResponse`;
either costs only that service's output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agent.connectors.errors import BadServiceResponse
from agent.dream.dialog import (
    COUNTS_KEY,
    PREV_BOT_ANNOTATIONS_KEY,
    PROFILE_FIELDS,
    Counts,
    bot_dict,
    dialog_dict,
    human_dict,
    window_dicts,
)
from agent.sdk.models import check_attribute_keys
from agent.state.models import (
    Bot,
    BotUtterance,
    Human,
    HumanUtterance,
    Hypothesis,
    Utterance,
    profile_field_problem,
)
from agent.state.write_once import KeyWrittenTwice, WriteOnce
from agent.turn.limits import RefusedOutput

#: Fields of the user and bot records a service never writes.
ID_FIELDS = frozenset({"id", "user_external_id", "user_type", "_id"})
#: What the human attributes keep when ``..._reset_human_attributes_for_first_turn`` runs.
KEPT_ON_RESET = "disliked_skills"


class TurnState:
    """The dialog as this turn's services change it."""

    def __init__(
        self,
        *,
        dialog_id: str,
        channel_type: str,
        human: Human,
        bot: Bot,
        history: list[Utterance],
        utterance: HumanUtterance,
        counts: Counts,
        pipeline_names: list[str],
    ) -> None:
        self.dialog_id = dialog_id
        self.channel_type = channel_type
        self.human = human
        self.bot = bot
        self.history = history
        self.utterance = utterance
        self.counts = counts
        self.pipeline_names = pipeline_names
        utterance.annotations = WriteOnce(utterance.annotations)
        utterance.attributes[COUNTS_KEY] = dict(counts)
        self.bot_utterance: BotUtterance | None = None
        self.human_attributes: dict[str, Any] = dict(human.attributes)
        self.bot_attributes: dict[str, Any] = dict(bot.attributes)
        self.profile: dict[str, Any] = {}
        #: changes to merge into the stored records when the turn is stored
        self.human_changes: dict[str, Any] = {}
        self.bot_changes: dict[str, Any] = {}
        self.attributes_reset = False
        #: why parts of the answer being applied were not (its service's errors)
        self.refusals: list[str] = []
        #: the stored window's dicts, made once: formatters read them on every call
        self._history_dicts = window_dicts(history)

    # -- what formatters see --------------------------------------------------------------

    def dialog(self) -> dict[str, Any]:
        turn: list[Utterance] = [self.utterance]
        if self.bot_utterance is not None:
            turn.append(self.bot_utterance)
        return dialog_dict(
            dialog_id=self.dialog_id,
            channel_type=self.channel_type,
            history=self.history,
            turn=turn,
            counts=self.counts,
            human=human_dict(self.human, self.human_attributes, self.profile),
            bot=bot_dict(self.bot, self.bot_attributes),
            attributes={"pipeline": self.pipeline_names},
            history_dicts=self._history_dicts,
        )

    @property
    def last(self) -> Utterance:
        return self.bot_utterance if self.bot_utterance is not None else self.utterance

    # -- attribute merges (dp-agent's update_human / update_bot) ----------------------------

    def update_human(self, attributes: Any, service: str) -> None:
        for key, value in _attributes(attributes, service, "human_attributes").items():
            if key in ID_FIELDS:
                raise RefusedOutput(service, f"human_attributes cannot set {key!r}")
            if key == "attributes" and isinstance(value, dict):
                self._set_human(check_attribute_keys(dict(value)))
            elif key == "profile" and isinstance(value, dict):
                self._set_profile(check_attribute_keys(dict(value)), service)
            elif key in PROFILE_FIELDS:
                self._set_profile({key: value}, service)
            elif key == "persona":
                raise RefusedOutput(service, "human_attributes cannot replace the persona")
            else:
                self._set_human({key: value})

    def update_bot(self, attributes: Any, service: str) -> None:
        for key, value in _attributes(attributes, service, "bot_attributes").items():
            if key in ID_FIELDS:
                raise RefusedOutput(service, f"bot_attributes cannot set {key!r}")
            if key == "attributes" and isinstance(value, dict):
                self._set_bot(check_attribute_keys(dict(value)))
            elif key == "persona":
                raise RefusedOutput(service, "bot_attributes cannot replace the persona")
            else:
                self._set_bot({key: value})

    def _set_human(self, values: dict[str, Any]) -> None:
        self.human_attributes.update(values)
        self.human_changes.update(values)

    def _set_profile(self, values: dict[str, Any], service: str) -> None:
        """A typed profile field (``location``, ``name``, ...) given a value of another type
        is not merged: stored, it would make the user unreadable. Why is kept in
        :attr:`refusals` for the executor to record as the service's error; the rest of
        the service's output is kept."""
        for key, value in values.items():
            problem = profile_field_problem(key, value)
            if problem is None:
                self.profile[key] = value
            else:
                self.refusals.append(f"profile field {key!r} not merged: {problem}")

    def _set_bot(self, values: dict[str, Any]) -> None:
        self.bot_attributes.update(values)
        self.bot_changes.update(values)

    # -- the methods ------------------------------------------------------------------------

    def apply(self, method: str | None, payload: Any, label: str, ind: int) -> None:
        """Write ``payload`` as ``method`` says; ``label`` is the service's own name."""
        if method is None or method == "save_dialog":
            return  # the turn is stored once, at its end
        handler = self._methods()[method]
        try:
            handler(payload, label, ind)
        except KeyWrittenTwice as exc:
            raise RefusedOutput(label, f"{exc.key!r} was already written this turn") from exc
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise BadServiceResponse(
                label, f"{method}: the answer does not fit ({type(exc).__name__}: {exc})"
            ) from exc

    def _methods(self) -> dict[str, Callable[[Any, str, int], None]]:
        return {
            "add_annotation": self.add_annotation,
            "add_annotation_prev_bot_utt": self.add_annotation_prev_bot_utt,
            "add_hypothesis": self.add_hypothesis,
            "add_hypothesis_annotation": self.add_hypothesis_annotation,
            "add_hypothesis_annotation_batch": self.add_hypothesis_annotation_batch,
            "add_text": self.add_text,
            "add_bot_utterance": self.add_bot_utterance,
            "add_bot_utterance_last_chance": self.add_bot_utterance_last_chance,
            "add_bot_utterance_last_chance_overwrite": self.add_bot_utterance_last_chance_overwrite,
            "add_failure_bot_utterance": self.add_failure_bot_utterance,
            "update_attributes": self.update_attributes,
            "add_annotation_and_reset_human_attributes_for_first_turn": (
                self.add_annotation_and_reset
            ),
        }

    def add_annotation(self, payload: Any, label: str, ind: int) -> None:
        annotations = self.last.annotations
        if not isinstance(annotations, WriteOnce):
            annotations = self.last.annotations = WriteOnce(annotations)
        annotations[label] = payload

    def add_annotation_prev_bot_utt(self, payload: Any, label: str, ind: int) -> None:
        """The utterance before the newest: this turn's human one once the bot has answered,
        otherwise the previous turn's bot utterance, whose annotation is kept with this
        turn's human utterance (earlier turns' records are never rewritten)."""
        if self.bot_utterance is not None:
            self.utterance.annotations[label] = payload
            return
        if not self.history or not isinstance(self.history[-1], BotUtterance):
            return
        notes = self.utterance.attributes.setdefault(PREV_BOT_ANNOTATIONS_KEY, {})
        if label in notes or label in self.history[-1].annotations:
            raise RefusedOutput(
                label, f"{label!r} was already written on the previous bot utterance"
            )
        notes[label] = payload

    def add_hypothesis(self, payload: Any, label: str, ind: int) -> None:
        if self.bot_utterance is not None:
            raise RefusedOutput(label, "add_hypothesis after the bot utterance was chosen")
        if isinstance(payload, dict):
            payload = [payload]
        if not isinstance(payload, list):
            raise BadServiceResponse(
                label,
                f"add_hypothesis: expected a list of hypotheses, got {type(payload).__name__}",
            )
        added = []
        for item in payload:
            if not isinstance(item, dict):
                raise BadServiceResponse(
                    label,
                    f"add_hypothesis: a hypothesis must be an object, got {type(item).__name__}",
                )
            fields = {k: v for k, v in item.items() if k not in ("skill_name", "annotations")}
            try:
                hypothesis = Hypothesis.model_validate({"skill_name": label, **fields})
                check_attribute_keys(hypothesis.human_attributes)
                check_attribute_keys(hypothesis.bot_attributes)
            except (ValidationError, ValueError) as exc:
                raise BadServiceResponse(
                    label, f"add_hypothesis: not a hypothesis: {_first(exc)}"
                ) from exc
            added.append(hypothesis)
        self.utterance.hypotheses.extend(added)

    def add_hypothesis_annotation(self, payload: Any, label: str, ind: int) -> None:
        hypotheses = self.utterance.hypotheses
        if not 0 <= ind < len(hypotheses):
            raise BadServiceResponse(
                label, f"task {ind} has no hypothesis (there are {len(hypotheses)})"
            )
        _annotate(hypotheses[ind], label, payload)

    def add_hypothesis_annotation_batch(self, payload: Any, label: str, ind: int) -> None:
        if self.bot_utterance is not None:
            return
        batch = payload["batch"]
        if not isinstance(batch, list):
            raise BadServiceResponse(
                label, 'add_hypothesis_annotation_batch: "batch" must be a list'
            )
        hypotheses = self.utterance.hypotheses
        if len(batch) != len(hypotheses):  # dp-agent's rule: an empty note on every one
            batch = [{} for _ in hypotheses]
        for hypothesis, note in zip(hypotheses, batch, strict=True):
            _annotate(hypothesis, label, note)

    def add_text(self, payload: Any, label: str, ind: int) -> None:
        if not isinstance(payload, str):
            raise BadServiceResponse(
                label, f"add_text: expected a string, got {type(payload).__name__}"
            )
        self.last.text = payload

    def add_bot_utterance(self, payload: Any, label: str, ind: int) -> None:
        payload = selector_answer(payload, label)
        if self.bot_utterance is not None:
            raise RefusedOutput(label, "a bot utterance was already added this turn")
        self.update_human(payload.get("human_attributes", {}), label)
        self.update_bot(payload.get("bot_attributes", {}), label)
        attributes = payload.get("attributes", {})
        self.bot_utterance = BotUtterance(
            text=payload["text"],
            orig_text=payload["text"],
            active_skill=payload["skill_name"],
            confidence=payload["confidence"],
            annotations=WriteOnce(payload.get("annotations") or {}),
            user=bot_dict(self.bot, self.bot_attributes),
            attributes=check_attribute_keys(dict(attributes))
            if isinstance(attributes, dict)
            else {},
        )

    def _bot_from_text(self, payload: Any, label: str) -> BotUtterance:
        text = payload if isinstance(payload, str) else payload["text"]
        if not isinstance(text, str):
            raise BadServiceResponse(label, "the answer's text must be a string")
        annotations = {} if isinstance(payload, str) else payload.get("annotations") or {}
        return BotUtterance(
            text=text,
            orig_text=text,
            active_skill=label,
            confidence=0.0,
            annotations=WriteOnce(annotations),
            user=bot_dict(self.bot, self.bot_attributes),
        )

    def add_bot_utterance_last_chance(self, payload: Any, label: str, ind: int) -> None:
        if self.bot_utterance is None:
            self.bot_utterance = self._bot_from_text(payload, label)

    def add_bot_utterance_last_chance_overwrite(self, payload: Any, label: str, ind: int) -> None:
        new = self._bot_from_text(payload, label)
        if self.bot_utterance is not None:
            new.utt_id = self.bot_utterance.utt_id
        self.bot_utterance = new

    def add_failure_bot_utterance(self, payload: Any, label: str, ind: int) -> None:
        if self.bot_utterance is not None:
            raise RefusedOutput(label, "a bot utterance was already added this turn")
        self.bot_utterance = self._bot_from_text(payload, label)

    def update_attributes(self, payload: Any, label: str, ind: int) -> None:
        if not isinstance(payload, dict):
            raise BadServiceResponse(label, "update_attributes: expected an object")
        if isinstance(payload.get("human_attributes"), dict):
            self.update_human(payload["human_attributes"], label)
        if isinstance(payload.get("bot_attributes"), dict):
            self.update_bot(payload["bot_attributes"], label)

    def add_annotation_and_reset(self, payload: Any, label: str, ind: int) -> None:
        """On the dialog's first utterance the user's attributes start afresh (but for
        ``disliked_skills``), as dp-agent's ExtendedStateManager does."""
        self.add_annotation(payload, label, ind)
        if self.counts["utterances"] == 0:
            kept = self.human_attributes.get(KEPT_ON_RESET, [])
            self.human_attributes = {KEPT_ON_RESET: kept}
            self.human_changes = {KEPT_ON_RESET: kept}
            self.attributes_reset = True

    def chosen_index(self) -> int | None:
        """The hypothesis the bot utterance came from, if any."""
        bot = self.bot_utterance
        if bot is None:
            return None
        for index, hypothesis in enumerate(self.utterance.hypotheses):
            if hypothesis.skill_name == bot.active_skill and hypothesis.text == bot.orig_text:
                return index
        return None


def selector_answer(payload: Any, label: str) -> dict[str, Any]:
    """A response selector's answer as a dict: Dream's ``[skill_name, text, confidence(,
    human_attributes, bot_attributes(, attributes))]`` or the dict itself."""
    if isinstance(payload, list | tuple):
        keys = (
            "skill_name",
            "text",
            "confidence",
            "human_attributes",
            "bot_attributes",
            "attributes",
        )
        if len(payload) not in (3, 5, 6):
            raise BadServiceResponse(
                label,
                "a response selector answers [skill_name, text, "
                "confidence] (3, 5 or 6 items), got "
                f"{len(payload)} items",
            )
        payload = dict(zip(keys, payload, strict=False))
    if not isinstance(payload, dict):
        raise BadServiceResponse(label, f"not a selection: got {type(payload).__name__}")
    if not isinstance(payload.get("text"), str) or not isinstance(payload.get("skill_name"), str):
        raise BadServiceResponse(label, 'a selection needs a string "skill_name" and "text"')
    confidence = payload.get("confidence")
    if not isinstance(confidence, int | float) or isinstance(confidence, bool):
        raise BadServiceResponse(label, 'a selection needs a numeric "confidence"')
    return payload


def selected_labels(payload: Any, service: str) -> set[str]:
    """A skill selector's answer: skill names (a list of them per dialog)."""
    if not isinstance(payload, list) or not all(isinstance(n, str) for n in payload):
        raise BadServiceResponse(service, "a selector answers a list of service names")
    return set(payload)


def _attributes(value: Any, service: str, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadServiceResponse(service, f"{what} must be an object")
    try:
        return check_attribute_keys(dict(value))
    except ValueError as exc:
        raise RefusedOutput(service, f"{what}: {exc}") from exc


def _annotate(hypothesis: Hypothesis, label: str, note: Any) -> None:
    if label in hypothesis.annotations:
        raise RefusedOutput(label, f"{label!r} was already written on the hypothesis")
    hypothesis.annotations = {**hypothesis.annotations, label: note}


def _first(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        item = exc.errors()[0]
        return f"{'.'.join(str(p) for p in item['loc']) or 'answer'}: {item['msg']}"
    return str(exc)
