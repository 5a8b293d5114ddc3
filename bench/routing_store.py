"""An operator's own traffic as a routing set: the labelled and rated turns of a store,
written as :mod:`bench.routing` reads a set, so that a change of thresholds or of a
skill is measured on what their users say before it ships.

Every answered turn of every dialog is written, in order (the later turns need the earlier
ones' state: a name given, a question asked), and a turn is scored only when the store
says what fits it:

- its label, as ``chorus replay --labels`` reads stored ones: the human utterance's
  ``skill_labels`` attribute (a client sends it as an extra key of ``POST /``), the skills
  that may answer; ``["fallback"]`` (nothing the bot has should answer) is written
  ``["llm"]``, and ``llm`` beside cheap skills is dropped (a cheap skill that fits needs
  no LLM);
- else its answer's numeric rating: at or above ``good_at``, the skill that answered fits
  (an LLM answer: ``["llm"]``); at or below ``bad_at``, a cheap skill's answer did not fit,
  and only the LLM is known to (``["llm"]``); a bad LLM answer or fallback says nothing of
  what fits, and such a turn is not scored.

Unlabelled turns are written without ``fits``: they are sent, for the state, and not
counted.

    .venv/bin/python -m bench.routing --store sqlite:///chorus.db --export mine.jsonl
    .venv/bin/python -m bench.routing --set mine.jsonl
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from agent.backup.files import DialogFilter, selected_dialogs
from agent.cli.replay.labels import FALLBACK, STORED_LABEL
from agent.state.models import BotUtterance, Dialog, HumanUtterance
from agent.store.reader import open_reader

LLM = "llm"
#: Ratings this high mark a fitting answer, this low one that did not fit (thumbs up 1,
#: thumbs down 0 or -1; a 1-to-5 scale wants 4 and 2).
GOOD_AT = 1.0
BAD_AT = 0.0
#: Skills whose answer, rated, tells nothing of a cheap skill that fits.
NOT_CHEAP = frozenset({LLM, FALLBACK, "fallback_response"})


def fits_of(
    human: HumanUtterance, bot: BotUtterance, good_at: float = GOOD_AT, bad_at: float = BAD_AT
) -> list[str] | None:
    """What may answer this turn, as the store tells it (see the module), or None."""
    stored = human.attributes.get(STORED_LABEL)
    if isinstance(stored, str):
        stored = [part.strip() for part in stored.split("|")]
    if isinstance(stored, list) and all(isinstance(s, str) and s for s in stored) and stored:
        skills = list(dict.fromkeys(stored))
        if skills == [FALLBACK]:
            return [LLM]
        cheap = [s for s in skills if s not in NOT_CHEAP]
        return cheap or [LLM]
    rating, skill = bot.rating, bot.active_skill or ""
    if rating is None:
        return None
    if rating >= good_at:
        if skill == LLM:
            return [LLM]
        return None if skill in NOT_CHEAP else [skill]
    if rating <= bad_at and skill not in NOT_CHEAP:
        return [LLM]
    return None


def conversation(dialog: Dialog, good_at: float, bad_at: float) -> dict[str, Any] | None:
    """The dialog as one conversation of a set, or None when none of its turns is scored."""
    turns: list[dict[str, Any]] = []
    for first, second in itertools.pairwise(dialog.utterances):
        if isinstance(first, HumanUtterance) and isinstance(second, BotUtterance):
            fits = fits_of(first, second, good_at, bad_at)
            turns.append({"user": first.text, **({"fits": fits} if fits else {})})
    if not any("fits" in t for t in turns):
        return None
    return {"id": dialog.dialog_id, "turns": turns}


async def _export(url: str, target: Path, good_at: float, bad_at: float) -> int:
    reader = await open_reader(url)
    scored = 0
    try:
        with target.open("w", encoding="utf-8") as out:
            async for dialog in selected_dialogs(reader.reader, DialogFilter((), ())):
                found = conversation(dialog, good_at, bad_at)
                if found is not None:
                    scored += sum("fits" in t for t in found["turns"])
                    out.write(json.dumps(found) + "\n")
    finally:
        await reader.close()
    return scored


def export(url: str, target: Path, good_at: float = GOOD_AT, bad_at: float = BAD_AT) -> int:
    """Writes the store's dialogs with a scored turn to ``target``; how many turns are
    scored."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_export(url, target, good_at, bad_at))
