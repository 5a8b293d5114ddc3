"""Play ParlAI episodes through a running agent and score the answers (``chorus eval``),
and turn stored dialogs back into episodes (``chorus export-parlai``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from itertools import pairwise
from typing import Any

import httpx
from pydantic import BaseModel

from agent.message import Message
from agent.parlai.formats import Episode, Example
from agent.parlai.scores import TurnScores
from agent.sdk.errors import ChorusError

SCORES = ("exact_match", "f1", "hits_at_1", "hits_at_5", "mrr")
_SENT_FIELDS = ("text", "id", "label_candidates", "reward", "image")


class EpisodeScore(BaseModel):
    """Averages over the scored turns of one episode (or of all, for the total)."""

    name: str
    dialog_id: str | None = None
    turns: int = 0
    scored: int = 0
    exact_match: float = 0.0
    f1: float = 0.0
    hits_at_1: float = 0.0
    hits_at_5: float = 0.0
    mrr: float = 0.0

    @classmethod
    def of(
        cls, name: str, turns: int, scored: list[TurnScores], dialog_id: str | None = None
    ) -> EpisodeScore:
        means = {
            m: sum(getattr(t, m) for t in scored) / len(scored) if scored else 0.0 for m in SCORES
        }
        return cls(name=name, dialog_id=dialog_id, turns=turns, scored=len(scored), **means)


class EvalReport(BaseModel):
    episodes: list[EpisodeScore]
    overall: EpisodeScore


def observation(example: Example, user_id: str, last: bool) -> dict[str, Any]:
    """The observation for one example; labels travel as eval_labels, and the episode's
    last example closes the dialog. Sent as ParlAI sends a Message: JSON-safe, so a value
    JSON cannot carry (a dataset's ``reward:nan``) is left out instead of failing the run."""
    sent = Message({k: example[k] for k in _SENT_FIELDS if k in example})
    labels = example.get("eval_labels") or example.get("labels")
    if labels:
        sent["eval_labels"] = labels
    sent.update(user_id=user_id, episode_done=last or bool(example.get("episode_done")))
    return sent.json_safe_payload()


class ReplayError(ChorusError, RuntimeError):
    """The agent refused a turn; ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def evaluate(
    episodes: list[Episode],
    client: httpx.Client,
    *,
    user_prefix: str = "eval",
    on_turn: Callable[[], None] = lambda: None,
) -> EvalReport:
    """Each episode is one dialog of a fresh user; a failed request stops with its error."""
    run = uuid.uuid4().hex[:8]
    scores: list[EpisodeScore] = []
    every: list[TurnScores] = []
    for number, episode in enumerate(episodes, start=1):
        user_id = f"{user_prefix}-{run}-{number}"
        turn_scores: list[TurnScores] = []
        dialog_id = None
        for index, example in enumerate(episode):
            response = client.post(
                "/api/v1/chat", json=observation(example, user_id, last=index == len(episode) - 1)
            )
            if response.status_code != 200:
                raise ReplayError(
                    response.status_code,
                    f"episode {number}, turn {index + 1}: the agent answered "
                    f"{response.status_code}: {response.text[:300]}",
                )
            act = response.json()
            dialog_id = act["dialog_id"]
            if act.get("metrics"):  # ParlAI's wire name for the scores
                turn_scores.append(TurnScores.model_validate(act["metrics"]))
            on_turn()
        every.extend(turn_scores)
        name = str(episode[0].get("id", f"episode {number}"))
        scores.append(EpisodeScore.of(f"{number}: {name}", len(episode), turn_scores, dialog_id))
    total = EpisodeScore.of("overall", sum(s.turns for s in scores), every)
    return EvalReport(episodes=scores, overall=total)


def dialog_episode(dialog: dict[str, Any]) -> Episode:
    """A stored dialog as ParlAI examples: each human text, labelled with the bot's answer."""
    utterances = dialog["utterances"]
    examples: Episode = []
    for human, bot in pairwise(utterances):
        if human["speaker"] != "human" or bot["speaker"] != "bot":
            continue
        example: Example = {
            "id": bot["active_skill"],
            "text": human["text"],
            "labels": [bot["text"]],
        }
        candidates = human.get("attributes", {}).get("label_candidates")
        if candidates:
            example["label_candidates"] = candidates
        example["episode_done"] = False
        examples.append(example)
    if examples:
        examples[-1]["episode_done"] = True
    return examples


def fetch_dialogs(
    client: httpx.Client, users: Iterable[str], dialogs: Iterable[str]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for user in users:
        response = client.get(f"/api/user/{user}")
        response.raise_for_status()
        found.extend(response.json())
    for dialog_id in dialogs:
        response = client.get(f"/api/dialogs/{dialog_id}", params={"view": "chorus"})
        response.raise_for_status()
        found.append(response.json())
    return found
