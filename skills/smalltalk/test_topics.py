"""The persona's everyday topics, found by meaning, and lines that do not come back."""

from typing import Any

from fastapi.testclient import TestClient

from agent.sdk import DialogView
from agent.sdk.testing import view
from skills.smalltalk.app import RECENT, app, from_topics
from skills.smalltalk.persona import FILE_PERSONA
from skills.smalltalk.topics import TopicSpec, closest

#: Questions people ask a bot they just met, none of them an example of persona.json,
#: and the topic each is about.
ON_TOPIC = [
    ("Do you have any pets?", "pets"),
    ("Do you own any animals?", "pets"),
    ("What kind of music do you like?", "music"),
    ("Do you listen to jazz?", "music"),
    ("Could you tell me a random fact?", "facts"),
    ("Which films have you enjoyed recently?", "movies"),
    ("Do you know how to bake?", "cooking"),
    ("How old were you last year?", "age"),
    ("Where would you go if you could go anywhere?", "travel"),
    ("Do you ever sleep?", "nature"),
    ("do you sleep", "nature"),
    ("r u a girl or a boy", "nature"),
    ("u ever dream?", "nature"),
    ("Where are you located?", "home"),
    ("do u ever play computer games", "games"),
    ("are you any good at chess?", "games"),
    ("so what do you get up to all day", "days"),
    ("do you ever feel lonely", "days"),
]
#: Questions on none of the topics: a line about pets or music would be about something else.
OFF_TOPIC = [
    "What's the weather like in Paris?",
    "What is the capital of France?",
    "Is it going to rain?",
    "Who won the world cup?",
    "What is 2 plus 2?",
    "Where are my dialogs stored?",
    "who won the chess world championship",
]


def test_questions_are_matched_to_their_topic_by_meaning() -> None:
    found = {text: closest(text, FILE_PERSONA.topics) for text, _ in ON_TOPIC}
    assert {text: hit and hit[0] for text, hit in found.items()} == dict(ON_TOPIC)


def test_questions_about_something_else_match_no_topic() -> None:
    assert {text: closest(text, FILE_PERSONA.topics) for text in OFF_TOPIC} == dict.fromkeys(
        OFF_TOPIC
    )


def respond(client: TestClient, dialog: dict[str, Any]) -> dict[str, Any] | None:
    response = client.post("/respond", json={"dialogs": [dialog]})
    assert response.status_code == 200, response.text
    (answer,) = response.json()
    return answer[0] if answer else None


def test_a_deployments_persona_brings_its_own_topics() -> None:
    dialog = view("Do you like gardening?")
    with TestClient(app) as client:
        unsure = respond(client, dialog)  # no topic, no corpus line on it
        assert unsure is not None and unsure["smalltalk_topic"] == "opinion", unsure
        dialog["bot"]["persona"] = {
            "topics": {
                "garden": TopicSpec(
                    examples=["do you like gardening", "do you grow plants"],
                    lines=["I grow tomatoes in a spreadsheet."],
                ).model_dump()
            }
        }
        answer = respond(client, dialog)
    assert answer is not None
    assert (answer["text"], answer["topic"]) == ("I grow tomatoes in a spreadsheet.", "garden")


def test_a_line_said_before_the_window_does_not_come_back_while_others_remain() -> None:
    """The skill remembers its last lines in the bot's attributes: a topic asked again
    twenty turns later gets its other line, not the same one."""
    said: list[str] = []
    attributes: dict[str, Any] = {}
    with TestClient(app) as client:
        for _ in range(2):
            dialog = view("Do you like to travel?")  # the window: this question alone
            dialog["bot"]["attributes"] = attributes
            answer = respond(client, dialog)
            assert answer is not None and answer["topic"] == "travel"
            said.append(answer["text"])
            attributes = {**attributes, **answer["bot_attributes"]}
    assert said[0] != said[1]
    assert attributes[RECENT][-2:] == said


def test_another_after_a_fun_fact_gets_another_fact_and_after_other_lines_none() -> None:
    """ "another" or "one more please" a line or two after a fun fact asks for another
    fact, a topic people ask for more of; after the bot's home ("I live on a server...")
    it asks for nothing the persona holds."""
    fact = FILE_PERSONA.topics["facts"].lines[0]
    home = FILE_PERSONA.topics["home"].lines[0]
    with TestClient(app) as client:
        another = respond(client, view("tell me a fun fact", fact, "another"))
        later = respond(client, view("tell me a fun fact", fact, "wow", "😄", "one more please"))
        after_home = respond(client, view("where do you live", home, "another"))
    for answer in (another, later):
        assert answer is not None and answer["topic"] == "facts", answer
        assert answer["text"] in FILE_PERSONA.topics["facts"].lines and answer["text"] != fact
    assert after_home is None or after_home.get("topic") != "home", after_home


def test_a_question_in_peoples_own_words_is_offered_a_little_further_out() -> None:
    """ "ever tried baking?" and "fun fact pls" fall just under the topic's threshold in
    meaning; asked (a question, a bid), the skill offers the topic's line, for the topic's
    curve to weigh. A statement as near is the user's own news ("I really love old films!"
    is near "what movies do you watch"), and no line about the bot is offered for it."""

    def offered(text: str) -> str | None:
        dialog = DialogView.model_validate(view(text))
        found = from_topics(dialog, FILE_PERSONA, [])
        return found.topic if found is not None else None

    assert [offered("ever tried baking?"), offered("fun fact pls")] == ["cooking", "facts"]
    assert offered("I really love old films!") is None
