"""Ordinary first questions to the default bot (pipeline.json, no LLM), through the agent.

Not the scripted first conversation (test_first_conversation.py) but what people ask a bot
they just met about everything else: travel, pets, music, films, food, facts, its age. No
phrasing here is an example of the persona's topics. Each answer must be on the topic asked
(a question is never answered with a line about something else) or the fallback's honest
"I don't know" in varied words: a persona topic found by a loose match is less likely to
fit than not (its calibrated chance, shared/calibration.py), and then the skill says
nothing. The ones no skill of the default bot can know always get the fallback, the closest
matches their topic, and no line comes back in the conversation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from shared.jokes import JOKES
from tests.conftest import AgentFactory
from tests.e2e.test_default_pipeline import converse, say, shipped_pipeline
from tests.support.servers import ServerThread

#: (what the user says, the skill that must answer, the persona topic of the answer or "").
SCRIPT: list[tuple[str, str, str]] = [
    ("Hi there", "greeting", ""),
    ("I'm Tom", "greeting", ""),
    ("Do you like going abroad?", "smalltalk", "travel"),
    ("How old were you last year?", "smalltalk", "age"),
    ("What's the weather like in Paris?", "fallback", ""),
    ("Could you tell me a random fact?", "smalltalk", "facts"),
    ("What is the capital of France?", "fallback", ""),
    ("I play the guitar in a band", "smalltalk", "music"),
    ("Do you listen to jazz?", "smalltalk", "music"),
    ("Do you own any animals?", "smalltalk", "pets"),
    ("I love dogs", "smalltalk", "pets"),
    ("Which films have you enjoyed recently?", "smalltalk", "movies"),
    ("Where would you go if you could go anywhere?", "smalltalk", "travel"),
    ("Teach me something I don't know", "smalltalk", "facts"),
    ("Do you know how to bake?", "smalltalk", "cooking"),
    ("Who won the world cup?", "fallback", ""),
]
#: The persona's topics the default bot answers here without an LLM: those found by a
#: close match ("Do you own any animals?", "Do you know how to bake?").
MIN_ON_TOPIC = 2


@pytest.fixture
def bot(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> httpx.Client:
    """The default bot, as `make run` starts it without an LLM endpoint."""
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    return agent(shipped_pipeline(services))


def human_turns(client: httpx.Client, user: str) -> list[dict[str, Any]]:
    """The user's stored utterances, each with its annotations and every hypothesis."""
    (dialog,) = client.get(f"/api/user/{user}").json()
    return [u for u in dialog["utterances"] if u["speaker"] == "human"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_ordinary_questions_get_answers_on_their_topic_and_no_line_twice(
    bot: httpx.Client,
) -> None:
    answers, shown = converse(bot, [text for text, _, _ in SCRIPT], user="tom")

    asked = human_turns(bot, "tom")
    got = []
    for answer, utterance in zip(answers, asked, strict=True):
        topics = [
            h.get("topic", "") for h in utterance["hypotheses"] if h["text"] == answer["response"]
        ]
        got.append((answer["active_skill"], topics[0] if topics else ""))
    expected = [(skill, topic) for _, skill, topic in SCRIPT]
    assert all(g in (e, ("fallback", "")) for g, e in zip(got, expected, strict=True)), shown
    assert all(g == e for g, e in zip(got, expected, strict=True) if e[0] == "fallback"), shown
    on_topic = sum(g == e for g, e in zip(got, expected, strict=True) if e[0] == "smalltalk")
    assert on_topic >= MIN_ON_TOPIC, shown
    responses = [a["response"] for a in answers]
    assert len(set(responses)) == len(responses), shown


#: Low moods as people type them: with a word VADER scores as a feeling of its own before
#: the feeling ("pretty" +2.2: "I'm pretty anxious about my exam" read as good news), or
#: said as a feeling VADER does not know ("feeling" +0.5, "down" nothing: "im feeling kinda
#: down today" read as good news), which is also like asking how the bot feels ("I feel
#: down today" got "I'm doing great, thanks for asking! How are you?").
LOW_MOODS = [
    "I'm pretty anxious about my exam",
    "super tired today, long week at work",
    "im pretty sad tbh",
    "im feeling kinda down today",
    "I feel down today",
]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_low_mood_gets_sympathy_not_gladness_nor_how_the_bot_is(bot: httpx.Client) -> None:
    for n, text in enumerate(LOW_MOODS):
        answer = say(bot, text, user=f"low-{n}")
        (asked,) = human_turns(bot, f"low-{n}")
        chosen = [h for h in asked["hypotheses"] if h["text"] == answer["response"]]
        assert answer["active_skill"] == "smalltalk", (text, answer)
        assert chosen[0].get("smalltalk_topic") == "empathy", (text, chosen)
        assert asked["annotations"]["sentiment"]["label"] == "negative", (text, asked)


#: A first conversation in loose typing, through the default bot without an LLM: each turn
#: is a cheap skill's, which it heard before only in other words (what the user says, the
#: skill that answers, words its answer holds).
LOOSE: list[tuple[str, str, str]] = [
    ("hii bot", "greeting", "What's your name?"),
    ("whats yours", "greeting", "I'm Chorus! And what's your name?"),
    ("fine. dave", "greeting", "Nice to meet you, Dave!"),
    ("is this a real person typing?", "smalltalk", "Chorus"),
    ("say smth funny", "smalltalk", ""),
    ("go on one more", "smalltalk", ""),
    ("aight im out, later", "smalltalk", ""),
]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_first_conversation_typed_loosely_is_heard_by_its_cheap_skills(
    bot: httpx.Client,
) -> None:
    """The bot asked about in the third person, a joke asked as something funny and one
    more, a name given after a word of assent and the name asked back, a greeting
    stretched and a goodbye after a clause (right after a joke: no laugh): none reaches
    the fallback."""
    answers, shown = converse(bot, [text for text, _, _ in LOOSE], user="dave")
    got = [(a["active_skill"], a["response"]) for a in answers]
    for (_, skill, words), (active, response) in zip(LOOSE, got, strict=True):
        assert active == skill and words in response, shown
    joke, more = got[4][1], got[5][1]
    assert joke in JOKES and more in JOKES and joke != more, shown
    assert "bye" in got[6][1].lower() or "see you" in got[6][1].lower(), shown


def test_a_goodbye_in_a_slavic_language_is_no_question_opened_by_do(bot: httpx.Client) -> None:
    """ "do widzenia" (Polish) and "do svidaniya" (Russian) say goodbye: their first word is
    no English "do" opening a question beyond small talk, so small talk nods to them as to
    a goodbye in any other language, where without an LLM the fallback's "I don't know"
    answered them."""
    for user, farewell in (("ola", "do widzenia"), ("anton", "do svidaniya")):
        answers, shown = converse(
            bot, ["hello", f"{user} here", "how are you?", farewell], user=user
        )
        assert answers[-1]["active_skill"] == "smalltalk", shown
