"""``bench.routing`` runs the shipped pipeline over a labelled set as a user starts it, and
its report agrees with the turns it stored; an operator's labelled and rated turns become
a set of the same kind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from bench.routing import (
    DEFAULT_SETS,
    HELD_OUT_SETS,
    SETS,
    TRAINING_SETS,
    Observed,
    pooled,
    pooled_names,
    report,
)
from bench.routing_store import export
from tests.conftest import agents, service_entry
from tests.support.processes import run_module, unmeasured_environment
from tests.support.servers import ServerThread
from tests.support.services import fixed_skill

#: Two short conversations: a greeting and the name, a question only an LLM answers, a
#: question about Chorus, and a turn sent for its state but not scored.
TINY_SET: list[dict[str, Any]] = [
    {
        "id": "tiny-1",
        "turns": [
            {"user": "Hello!", "fits": ["greeting"]},
            {"user": "My name is Ann", "fits": ["greeting"]},
            {"user": "Can you convert 30 degrees Celsius to Fahrenheit?", "fits": ["llm"]},
            {"user": "What is my name?", "fits": ["greeting"]},
        ],
    },
    {
        "id": "tiny-2",
        "turns": [
            {"user": "ok"},
            {"user": "What is Chorus?", "fits": ["faq", "knowledge"]},
            {"user": "Explain how a rainbow forms.", "fits": ["llm"]},
        ],
    },
]


def pct(part: int, whole: int) -> float:
    return round(part / whole, 4)


@pytest.mark.one_at_a_time("stack")
@pytest.mark.timeout(300)
def test_the_report_counts_the_turns_it_stored(tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in TINY_SET))
    done = run_module(
        "bench.routing",
        "--set",
        str(path),
        "--out",
        str(tmp_path),
        timeout=280,
        env=unmeasured_environment("LLM_", "CHORUS_"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "routing-tiny.json").read_text())
    on, off = result["turns"]["llm_on"], result["turns"]["llm_off"]
    # the unscored turn was sent and is not counted
    assert [t["text"] for t in on] == [
        t["user"] for c in TINY_SET for t in c["turns"] if "fits" in t
    ]
    by_text = {t["text"]: t for t in on}
    off_by_text = {t["text"]: t for t in off}
    # what a user sees: the greeting script greets and remembers the name, with or without
    # the LLM; a question only an LLM answers goes to it, and without it to the fallback
    assert by_text["Hello!"]["skill"] == off_by_text["Hello!"]["skill"] == "greeting"
    assert "Ann" in by_text["What is my name?"]["answer"]
    for question in ("Can you convert 30 degrees Celsius to Fahrenheit?",):
        assert by_text[question]["skill"] == "llm" and by_text[question]["llm_asked"]
        assert by_text[question]["answer"].startswith("An answer from the LLM")
        assert off_by_text[question]["skill"] in {"fallback", "fallback_response"}
    # the figures are the turns' own
    n = len(on)
    cheap = [t for t in on if t["skill"] not in {"llm", "fallback", "fallback_response"}]
    wrong = [t for t in cheap if t["skill"] not in t["fits"]]
    asked = [t for t in on if t["llm_asked"]]
    figures = result["llm_on"]
    assert figures["turns"] == n == 6
    assert figures["wrong_cheap"] == pct(len(wrong), n)
    assert figures["fitting_cheap"] == pct(len(cheap) - len(wrong), n)
    assert figures["llm_asked"] == pct(len(asked), n)
    # the LLM counted the requests the stored traces say it was sent (one per asked turn,
    # and one for the turn that was not scored, if it was asked)
    assert result["llm_requests_counted_by_the_llm"] >= len(asked) > 0
    only = [t for t in off if t["fits"] == ["llm"]]
    fell_back = [t for t in only if t["skill"] in {"fallback", "fallback_response"}]
    assert result["llm_off"]["llm_only_turns"] == len(only) == 2
    assert result["llm_off"]["fallback_on_llm_only"] == pct(len(fell_back), len(only))
    assert result["llm_off"]["cheap_pretended_on_llm_only"] == len(only) - len(fell_back)
    # the curve: every turn goes to the LLM at a run_below above any confidence, none at 0
    curve = {point["run_below"]: point for point in result["curve"]}
    assert curve[1.01]["llm_share"] == 1.0 and curve[1.01]["quality"] == 1.0
    assert curve[0.0]["llm_share"] == 0.0
    assert (tmp_path / "routing-tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrong cheap answers" in done.stdout and "run_below" in done.stdout


def test_a_set_with_a_bad_label_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    lines = [
        {"id": "a", "turns": [{"user": "Hello!", "fits": ["greeting"]}]},
        {"id": "b", "turns": [{"user": "Hello!", "fits": ["greeting", "llm"]}]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run_module("bench.routing", "--set", str(path), "--out", str(tmp_path))
    assert done.returncode == 2
    assert f"{path}, line 2" in done.stderr and '"llm" is a label alone' in done.stderr
    assert not (tmp_path / "routing-bad.json").exists()
    # a name that is neither a set's nor a file's is refused, naming what may be given
    done = run_module("bench.routing", "--set", "heldot", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "heldot is no set's name and no file" in done.stderr and "heldout" in done.stderr
    # several sets are all read before any runs: a bad one after a good one stops the run
    # at once, naming it, and the good one is not measured first
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(lines[0]) + "\n")
    done = run_module("bench.routing", "--set", str(good), str(path), "--out", str(tmp_path))
    assert done.returncode == 2
    assert f"{path}, line 2" in done.stderr
    assert not (tmp_path / "routing-good.json").exists()


def test_labelled_and_rated_turns_of_a_store_become_a_set(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    pipeline = {
        "services": {
            "skills": {"chat": service_entry(services(fixed_skill("chat", "hm", 0.7)).url)}
        }
    }
    with agents(tmp_path, db_url) as start:
        client = start(pipeline)

        def say(user: str, text: str, **extra: Any) -> str:
            reply = client.post("/", json={"user_id": user, "payload": text, **extra})
            assert reply.is_success, reply.text
            utt_id: str = reply.json()["utt_id"]
            return utt_id

        say("labelled", "Hello", skill_labels=["greeting"])
        say("labelled", "What is the capital of Peru?", skill_labels=["fallback"])
        liked = say("rated", "Tell me a joke")
        disliked = say("rated", "Why is the sky blue?")
        say("rated", "ok")
        say("unlabelled", "Hello")
        for utt_id, rating in ((liked, 1), (disliked, 0)):
            body = {"user_id": "rated", "utt_id": utt_id, "rating": rating}
            rated = client.post("/rating/utterance", json=body)
            assert rated.is_success, rated.text
    target = tmp_path / "mine.jsonl"
    assert export(db_url, target) == 4
    conversations = {
        tuple(t["user"] for t in c["turns"]): c["turns"]
        for c in map(json.loads, target.read_text().splitlines())
    }
    assert conversations == {
        ("Hello", "What is the capital of Peru?"): [
            {"user": "Hello", "fits": ["greeting"]},
            {"user": "What is the capital of Peru?", "fits": ["llm"]},
        ],
        # a good rating: the skill that answered fits; a bad one: only the LLM may
        ("Tell me a joke", "Why is the sky blue?", "ok"): [
            {"user": "Tell me a joke", "fits": ["chat"]},
            {"user": "Why is the sky blue?", "fits": ["llm"]},
            {"user": "ok"},
        ],
    }


WEATHER = [
    "will it rain in Oslo tomorrow?",
    "is it going to be sunny on Saturday?",
    "how cold will it be tonight?",
    "do I need an umbrella today?",
    "what's the forecast for Paris this weekend?",
    "will it snow in Denver on Monday?",
    "how hot is it going to get in Madrid?",
    "is there a storm coming tonight?",
    "should I expect frost tomorrow morning?",
    "what will the weather be like in Rome on Friday?",
]
FACTS = [
    "who wrote War and Peace?",
    "what is the capital of Peru?",
    "explain how photosynthesis works",
    "how many bones are in the human body?",
    "who painted the Mona Lisa?",
    "what year did the Berlin Wall fall?",
    "can you summarise the plot of Hamlet?",
    "what does DNA stand for?",
    "how far is Mars from the Sun?",
    "translate good night into Italian",
]


def test_an_operators_skill_learns_its_turns_from_their_labels_through_the_reading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An operator's weather skill answers every turn with the same raw score: its curve
    alone cannot tell a forecast question from a question of fact, so it keeps asking the
    LLM and, without one, its answers (an even chance, under the LLM's run_below) give way
    to the fallback on every turn, forecasts too. Labelled turns of theirs
    refit the reading with a label for the skill (bench.calibrate, 5 folds by
    conversation: each judged by a reading fitted on the others): the forecasts are
    answered without the LLM and the questions of fact left to it. The fit says how far
    it is while it works, on stderr (a refit on a large set takes minutes)."""
    from bench.calibrate import cross_validate
    from bench.routing import Hypothesis, Observed

    turns = []
    for c in range(10):
        said = [(WEATHER[(c + k) % 10], "weather") for k in (0, 5)]
        said += [(FACTS[(c + k) % 10], "llm") for k in (0, 5)]
        for place, (text, label) in enumerate(said, start=1):
            turns.append(
                Observed(
                    conversation=f"w-{c}",
                    place=place,
                    text=text,
                    fits=[label],
                    skill="",
                    answer="",
                    llm_asked=False,
                    hypotheses=[
                        Hypothesis(
                            skill="weather",
                            confidence=0.9,
                            text="Sunny.",
                            raw=0.9,
                            answer_type="forecast",
                        ),
                        Hypothesis(skill="fallback", confidence=0.1, text="Hm."),
                    ],
                )
            )
    figures = cross_validate(turns, 5, run_below=0.6)
    told = capsys.readouterr().err
    assert all(f"bench.calibrate: fold {k} of 5" in told for k in range(1, 6))
    assert "the reading: 3 networks on 32 turns" in told
    alone, read = figures["5-fold"], figures["5-fold+read"]
    # the curve alone: half the answers fitted, so every turn goes to the LLM, and
    # without it the fallback answers every turn (the response selector's weak penalty)
    assert alone["llm_on"]["llm_asked"] == 1.0
    assert alone["llm_off"]["cheap_pretended_on_llm_only"] == 0
    assert alone["llm_off"]["fallback_on_cheap_labelled"] == 1.0
    # read: the forecasts are the skill's, the questions of fact the LLM's
    assert read["llm_on"]["llm_asked"] <= 0.6
    assert read["llm_on"]["wrong_cheap"] <= 0.05
    assert read["llm_off"]["cheap_pretended_on_llm_only"] <= 2


def silent_turn(text: str, fits: str) -> Observed:
    """A later turn, labelled for ``fits``, on which only the fallback said anything."""
    from bench.routing import Hypothesis, Observed

    return Observed(
        conversation="c",
        place=2,
        text=text,
        fits=[fits],
        skill="",
        answer="",
        llm_asked=False,
        llm_selected=True,
        hypotheses=[Hypothesis(skill="fallback", confidence=0.1, text="Hm.")],
    )


def test_the_replay_lets_small_talk_answer_by_the_reading_where_it_ran_and_the_intent_agrees() -> (
    None
):
    """bench.calibrate's replay of a turn on which small talk said nothing: a reading sure
    it is small talk's, with the annotator's nearest intent one of small talk's, answers
    with small talk without the LLM (as the skill does); a goodbye's intent on a question,
    an unsure reading, or a sure intent whose rule does not run small talk leave the turn
    to the fallback and the LLM."""
    from bench.calibrate import Read, decide, questions
    from shared.reading import shipped

    model = shipped()
    assert model is not None

    def replayed(
        text: str, smalltalk: float, intent: dict[str, Any], beyond: bool = False
    ) -> tuple[str, bool]:
        turn = silent_turn(text, "smalltalk")
        (asking,) = questions([turn])  # as the replay's reader reads the turn
        read = Read(
            {"smalltalk": smalltalk, "llm": 0.1}, model, intent, beyond=beyond, asking=asking
        )
        decided = decide(turn, {}, 0.6, read)
        return decided.skill, decided.llm_asked

    near = {"intent": None, "confidence": 0.0, "method": "similarity", "likeness": 0.4}
    identity = {**near, "nearest": "bot_identity"}
    farewell = {**near, "nearest": "farewell"}
    abilities = {"intent": "abilities", "confidence": 0.9, "nearest": "abilities", "likeness": 0.9}
    assert replayed("Are you a man or a machine?", 0.85, identity) == ("smalltalk", False)
    assert replayed("Are you a man or a machine?", 0.4, identity)[1] is True
    assert replayed("What's the weather like today?", 0.85, farewell)[1] is True
    assert replayed("right, I'm heading out now", 0.85, farewell) == ("smalltalk", False)
    # the shipped rule for a sure `abilities` runs only the FAQ: small talk never saw the turn
    assert replayed("what can you do?", 0.85, abilities)[1] is True
    # a turn that asks for what no small-talk line holds (skills/smalltalk/asks.py): small
    # talk does not answer it by the reading either
    assert replayed("what's a healthy lunch I can take to work?", 0.85, identity, True)[1] is True


def test_the_replay_lets_the_greeting_take_a_reply_to_its_name_question_by_the_reading() -> None:
    """bench.calibrate's replay of a reply to the greeting's name question on which the
    greeting said nothing ("Haruto desu"): a reading sure it is the greeting's answers
    with the greeting without the LLM, as the skill does; an unsure reading, a turn that is
    no such reply, or one saying how the user is ("I'm bored") leave it to the LLM."""
    from bench.calibrate import Read, decide
    from shared.reading import shipped

    model = shipped()
    assert model is not None

    def replayed(text: str, greeting: float, naming: bool = True) -> tuple[str, bool]:
        turn = silent_turn(text, "greeting")
        intent = {"intent": None, "confidence": 0.1, "nearest": "tell_name", "likeness": 0.2}
        read = Read({"greeting": greeting, "llm": 0.05}, model, intent, naming=naming)
        decided = decide(turn, {}, 0.6, read)
        return decided.skill, decided.llm_asked

    assert replayed("Haruto desu", 0.95) == ("greeting", False)
    assert replayed("Haruto desu", 0.8)[1] is True
    assert replayed("Haruto desu", 0.95, naming=False)[1] is True
    assert replayed("I'm bored", 0.95)[1] is True


def test_the_replay_lets_small_talk_answer_how_the_user_is_after_the_name_question() -> None:
    """bench.calibrate's replay of a statement right after the greeting's name question
    ("the kids are finally asleep and the house is quiet" after "Hi! I'm doing well,
    thanks. I'm Chorus. What's your name?"): read as such from the turn before it, it is
    small talk's by the reading from ``GREETED_FROM`` (0.8), as the skill answers it; under
    that floor, and for a name given there, the LLM is asked."""
    from dataclasses import replace

    from bench.calibrate import Read, decide, greeted_states
    from shared.reading import shipped

    model = shipped()
    assert model is not None
    asked = replace(
        silent_turn("wassup", "greeting"),
        place=1,
        skill="greeting",
        answer="Hi! I'm doing well, thanks. I'm Chorus. What's your name?",
    )
    told = silent_turn("the kids are finally asleep and the house is quiet", "smalltalk")
    named = replace(told, text="Jack. Jack from Leeds")
    assert greeted_states([asked, told]) == [False, True]
    assert greeted_states([asked, named]) == [False, False]

    def replayed(smalltalk: float, greeted: bool = True) -> tuple[str, bool]:
        intent = {"intent": None, "confidence": 0.1, "nearest": "ask_name", "likeness": 0.1}
        read = Read({"smalltalk": smalltalk, "llm": 0.05}, model, intent, greeted=greeted)
        decided = decide(told, {}, 0.6, read)
        return decided.skill, decided.llm_asked

    assert replayed(0.85) == ("smalltalk", False)
    assert replayed(0.75)[1] is True
    assert replayed(0.85, greeted=False)[1] is True


def observed(conversation: str, text: str, fits: list[str], skill: str) -> Observed:
    return Observed(
        conversation=conversation,
        place=1,
        text=text,
        fits=fits,
        skill=skill,
        answer="...",
        llm_asked=skill == "llm",
    )


def test_several_sets_are_pooled_turn_by_turn_and_a_group_names_its_sets() -> None:
    """``--set training`` runs every training set and reports them pooled: each turn
    counts once, whichever set it came from, so a small set weighs no more than a large
    one; the default run reports its two sets (one fitted on, one never tuned on) apart."""
    small_on = [observed("a-1", "hello", ["greeting"], "smalltalk")]
    large_on = [
        observed("b-1", "hi", ["greeting"], "greeting"),
        observed("b-1", "why is the sky blue", ["llm"], "llm"),
        observed("b-2", "what is chorus", ["faq"], "faq"),
    ]
    small_off = [observed("a-1", "hello", ["greeting"], "greeting")]
    large_off = [
        *large_on[:1],
        observed("b-1", "why is the sky blue", ["llm"], "smalltalk"),
        large_on[2],
    ]
    runs = [
        (report("small", small_on, small_off, 0, 0.7), small_on, small_off),
        (report("large", large_on, large_off, 1, 0.7), large_on, large_off),
    ]
    result = pooled("mine", runs, 0.7)
    assert result["sets"] == ["small", "large"] and result["conversations"] == 3
    assert result["llm_on"]["turns"] == 4
    assert result["llm_on"]["wrong_cheap"] == 0.25  # 1 of 4 turns, not the sets' mean 0.5
    assert result["llm_on"]["llm_asked"] == 0.25
    assert result["llm_requests_counted_by_the_llm"] == 1
    assert result["llm_off"]["cheap_pretended_on_llm_only"] == 1

    assert pooled_names(["training"]) == {"training": list(TRAINING_SETS)}
    assert pooled_names(["heldout", "mine.jsonl"]) == {
        "heldout": list(HELD_OUT_SETS),
        None: ["mine.jsonl"],
    }
    assert pooled_names(["dev", "mine.jsonl"]) == {"pooled": ["dev", "mine.jsonl"]}
    assert pooled_names(DEFAULT_SETS, pool=False) == {None: list(DEFAULT_SETS)}
    assert all((SETS / f"{name}.jsonl").is_file() for name in (*TRAINING_SETS, *HELD_OUT_SETS))
