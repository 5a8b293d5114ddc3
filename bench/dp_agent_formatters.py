"""The dialog formatter DeepPavlov Agent's pipeline uses in ``bench/dp_agent.py``.

It runs inside dp-agent's own process (Python 3.7, the interpreter Dream's agent image
has), so it imports nothing of Chorus and nothing newer than 3.7 allows. dp-agent turns
the whole dialog into a dict for every service call and hands it to the service's dialog
formatter, whose list of payloads it posts one by one; this one sends what
``bench/stubs.py`` reads and what the Chorus side of the benchmark sends its services:
``{"dialogs": [...]}``, a batch of one, with the dialog's last two utterances (the stubs'
``context_window``), in the shape Dream's own formatters give (``[{"dialogs":
[dialog]}]``).
"""

from __future__ import annotations

from typing import Any

#: Utterances a service is shown, as ``context_window`` in ``bench.stubs.pipeline``.
CONTEXT_WINDOW = 2


def last_utterances(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """One payload: the dialog with its last ``CONTEXT_WINDOW`` utterances (the last human
    utterance carries the turn's annotations and hypotheses, which the response selector
    reads)."""
    shown = {
        **dialog,
        "utterances": dialog["utterances"][-CONTEXT_WINDOW:],
        "human_utterances": dialog["human_utterances"][-1:],
        "bot_utterances": dialog["bot_utterances"][-1:],
    }
    return [{"dialogs": [shown]}]
