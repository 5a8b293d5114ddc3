"""What building dp-agent's dialog dict costs a turn of a Dream pipeline.

Every formatter call gets the dialog dict, and a Dream distribution has 20 to 40 services,
so the dict is built that many times per turn. This builds it for a window of 40 stored
utterances (20 human ones with 6 hypotheses and 3 annotations each, 20 bot ones), as the
executor does: the history's dicts once per turn, this turn's utterances per call.

    .venv/bin/python -m bench.dream_dialog [--calls 500] [--window 40]

Prints milliseconds per call, with the stored window's dicts made once (the agent) and
made on every call (for comparison).
"""

from __future__ import annotations

import argparse
import time

from agent.dream.dialog import counts_before, dialog_dict
from agent.dream.state import TurnState
from agent.state.models import Bot, BotUtterance, Human, HumanUtterance, Hypothesis


def window(size: int, human: Human, bot: Bot) -> list[HumanUtterance | BotUtterance]:
    history: list[HumanUtterance | BotUtterance] = []
    for i in range(size // 2):
        said = HumanUtterance(
            text=f"message {i} " * 5,
            user=human.model_dump(mode="json"),
            annotations={
                "spelling": "x" * 40,
                "ner": [{"text": "a", "type": "PER"}] * 3,
                "intents": {"yes": {"confidence": 0.1, "detected": 0}},
            },
        )
        said.hypotheses = [
            Hypothesis(
                skill_name=f"skill{k}",
                text="an answer " * 3,
                confidence=0.5,
                annotations={"toxic": {"x": 0.1}},
            )
            for k in range(6)
        ]
        history += [
            said,
            BotUtterance(
                text="answer " * 6,
                active_skill="skill1",
                confidence=0.5,
                user=bot.model_dump(mode="json"),
                annotations={"sentseg": {"segments": ["a", "b"]}},
            ),
        ]
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--window", type=int, default=40)
    args = parser.parse_args()
    human, bot = Human(user_external_id="bench"), Bot()
    history = window(args.window, human, bot)
    state = TurnState(
        dialog_id="d",
        channel_type="http_client",
        human=human,
        bot=bot,
        history=history,
        utterance=HumanUtterance(text="now"),
        counts=counts_before(history),
        pipeline_names=["s"] * 30,
    )
    started = time.perf_counter()
    for _ in range(args.calls):
        state.dialog()
    cached = (time.perf_counter() - started) / args.calls * 1000
    started = time.perf_counter()
    for _ in range(args.calls):
        dialog_dict(
            dialog_id="d",
            channel_type="http_client",
            history=history,
            turn=[state.utterance],
            counts=state.counts,
            human={},
            bot={},
        )
    uncached = (time.perf_counter() - started) / args.calls * 1000
    print(
        f"dialog dict, window {args.window}: {cached:.3f} ms per call "
        f"(history built every call: {uncached:.3f} ms)"
    )


if __name__ == "__main__":
    main()
