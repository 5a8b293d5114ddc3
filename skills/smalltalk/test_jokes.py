"""Jokes when asked for, another one on "Another one?", never a quotation from the corpus."""

from collections.abc import Iterator
from typing import Any

import pytest

from agent.sdk.testing import ServiceClient, view
from shared.calibration import raw_confidence
from shared.jokes import JOKES
from shared.lexicon import BADWORDS_FILE, Lexicon
from skills.smalltalk.app import app


@pytest.fixture(scope="module")
def client() -> Iterator[ServiceClient]:
    with ServiceClient(app) as client:
        yield client


def ask(client: ServiceClient, *dialogs: dict[str, Any]) -> list[list[dict[str, Any]]]:
    response = client.post("/respond", json={"dialogs": list(dialogs)})
    response.raise_for_status()
    answer: list[list[dict[str, Any]]] = response.json()
    return answer


def test_tell_me_a_joke_gets_a_joke_and_jokes_vary(client: ServiceClient) -> None:
    answers = ask(client, *(view("Tell me a joke", dialog_id=f"d{i}") for i in range(12)))
    texts = [a[0]["text"] for a in answers]
    assert all(a[0]["smalltalk_topic"] == "joke" for a in answers), answers
    assert all(text in JOKES for text in texts), texts
    # the corpus's "Tell me a joke" answers hold a quotation and a refusal: never them
    assert not [t for t in texts if "better to be silent" in t or "not a comedian" in t]
    assert len(set(texts)) >= 4
    assert raw_confidence(answers[0][0]) == 0.85


def test_no_joke_told_is_one_the_toxicity_annotator_flags(client: ServiceClient) -> None:
    """The response selector ranks a hypothesis the toxicity annotator flags below every clean
    one: a joke with "stupid" in it lost to the fallback's canned line."""
    answers = ask(client, *(view("Tell me a joke", dialog_id=f"j{i}") for i in range(300)))
    texts = {a[0]["text"] for a in answers}
    assert len(texts) > 100  # most of the list is told
    flagged = Lexicon.from_file(BADWORDS_FILE)
    assert [text for text in texts if flagged.find(text)] == []


@pytest.mark.parametrize(
    "text",
    [
        "tell me a joke please",
        "Can you tell me a funny joke?",
        "Do you know any jokes?",
        "Tell me another joke",
        "joke please",
        "A joke!",
        "I want to hear a joke",
        "Make me laugh",
        "Do you like jokes?",
        "Can you cheer me up with a joke?",
        "say something funny",  # something funny asked for is a joke
        "tell us something hilarious",
        "say smth funny",  # shorthand the speller would read as "smith": read as typed too
        "say sum funny",
        "got anything that'll make me giggle",
        "make me lol",
        "hit me with a joke then",
        "cheer me up w something funny pls",
        "got anything to make me smile",
        "ok just a normal joke then",  # plain, after one of a kind
        "any good jokes?",
        "got any good jokes for me",  # for the asker: no subject
        "ok just tell me any old joke",
    ],
)
def test_ways_to_ask_for_a_joke(client: ServiceClient, text: str) -> None:
    ((answer,),) = ask(client, view(text))
    assert answer["smalltalk_topic"] == "joke" and answer["text"] in JOKES, answer


@pytest.mark.parametrize(
    "text",
    [
        "I have a joke for you",
        "That's a bad joke",
        "You are a joke",
        "Another one?",
        "i have something funny to tell you",
        "i cracked a joke at work",
    ],
)
def test_what_is_not_a_request_for_a_joke(client: ServiceClient, text: str) -> None:
    (answer,) = ask(client, view(text))
    assert not [h for h in answer if h["smalltalk_topic"] == "joke"], answer


@pytest.mark.parametrize(
    "more",
    [
        "Another one?",
        "one more",
        "Haha, another!",
        "More please",
        "Ha! Give me another one",
        "another 1",
    ],
)
def test_another_one_after_a_joke_gets_another_joke(client: ServiceClient, more: str) -> None:
    ((first,),) = ask(client, view("Tell me a joke"))
    ((again,),) = ask(client, view("Tell me a joke", first["text"], more))
    assert again["smalltalk_topic"] == "joke" and again["text"] in JOKES
    assert again["text"] != first["text"]


def test_another_one_after_something_else_is_no_joke(client: ServiceClient) -> None:
    (answer,) = ask(client, view("How are you?", "Pretty well! And you?", "Another one?"))
    assert not [h for h in answer if h["smalltalk_topic"] == "joke"], answer


def test_a_joke_told_lately_is_not_told_again(client: ServiceClient) -> None:
    """Ten requests in one dialog, each with what the skill remembers: ten jokes."""
    attributes: dict[str, Any] = {}
    told: list[str] = []
    for turn in range(10):
        dialog = view("Tell me a joke", dialog_id="same", bot_attributes=attributes)
        dialog["utterances"][-1]["utt_id"] = f"u{turn}"
        ((answer,),) = ask(client, dialog)
        told.append(answer["text"])
        attributes = {**attributes, **answer["bot_attributes"]}
    assert len(set(told)) == len(told), told


@pytest.mark.parametrize("laugh", ["Haha", "lol", "That's funny!", "good one"])
def test_laughing_at_a_joke_gets_the_offer_of_another_and_yes_takes_it(
    client: ServiceClient, laugh: str
) -> None:
    ((joke,),) = ask(client, view("Tell me a joke"))
    ((offer,),) = ask(client, view("Tell me a joke", joke["text"], laugh))
    assert offer["smalltalk_topic"] == "laughed" and "another" in offer["text"], offer
    window = ("Tell me a joke", joke["text"], laugh, offer["text"])
    for reply in ("Yes", "sure, go on", "Another one"):
        ((again,),) = ask(client, view(*window, reply))
        assert again["smalltalk_topic"] == "joke" and again["text"] in JOKES, (reply, again)


def test_laughter_or_yes_without_a_joke_before_is_no_joke(client: ServiceClient) -> None:
    for text in ("Haha", "Yes"):
        (answer,) = ask(client, view("How are you?", "Pretty well! And you?", text))
        assert not [h for h in answer if h["smalltalk_topic"] in {"joke", "laughed"}], answer


def test_a_joke_on_a_subject_is_its_own_answer_type_and_the_shipped_jokes_seldom_fit_it(
    client: ServiceClient,
) -> None:
    """The shipped jokes are about programming: asked for one about Spanish food, the skill
    has only those, and its calibration (shared/calibration.json) says how seldom they fit,
    under the line where it answers at all."""
    plain, subject = ask(client, view("Tell me a joke"), view("tell me a joke about Spanish food"))
    assert plain[0]["routing"]["kind"] == "joke" and plain[0]["confidence"] >= 0.6
    assert subject == []


@pytest.mark.parametrize(
    "text",
    [
        "haha another knock knock one",
        "got any about football",
        "a knock knock one this time",
        "another dinosaur one",
        "got any good dad jokes",
        "do you know any puns",
        "bit, hit me with ur worst dad joke",  # a kind, after "your"
    ],
)
def test_another_joke_of_a_kind_right_after_one_gets_neither_laugh_nor_any_joke(
    client: ServiceClient, text: str
) -> None:
    """Right after a joke, "another football one" asks for a joke of a kind the shipped
    programming jokes seldom are: no "Ha! Want another one?" (a laugh's answer), and the
    joke it would tell is under the line where the skill answers at all, as one asked on a
    subject is."""
    (joke,) = ask(client, view("Tell me a joke"))
    (answer,) = ask(client, view("Tell me a joke", joke[0]["text"], text))
    assert answer == [], answer
    (laughed,) = ask(client, view("Tell me a joke", joke[0]["text"], "haha that was a good one"))
    assert laughed[0]["smalltalk_topic"] == "laughed", laughed


def test_the_offer_of_another_joke_is_taken_up_by_any_yes_the_annotator_reads(
    client: ServiceClient,
) -> None:
    """ "yeah go on then" is no word of the skill's own yes, but the intents annotator reads
    it as ``yes``: after the offer of another joke that is a request for one, and nowhere
    else."""
    ((joke,),) = ask(client, view("Tell me a joke"))
    ((offer,),) = ask(client, view("Tell me a joke", joke["text"], "haha"))
    yes = {"intents": {"intent": "yes", "confidence": 1.0, "method": "pattern"}}
    window = ("Tell me a joke", joke["text"], "haha", offer["text"], "yeah go on then")
    ((again,),) = ask(client, view(*window, annotations=yes))
    assert again["smalltalk_topic"] == "joke" and again["text"] in JOKES
    (elsewhere,) = ask(client, view("How are you?", "Fine!", "yeah go on then", annotations=yes))
    assert not [h for h in elsewhere if h["smalltalk_topic"] in {"joke", "laughed"}]


def test_one_more_after_the_users_own_request_gets_a_joke_whoever_told_the_first(
    client: ServiceClient,
) -> None:
    """With an LLM in the pipeline the first joke may be the LLM's, in words no list holds:
    "go on one more" a turn or two after the user asked for a joke is a request for one
    all the same. After a joke asked on a subject, "another" is one more on it: the
    shipped jokes have none, so no joke."""
    asked = (
        "got anything that'll make me giggle",
        "Why did the chicken join a band? It had the drumsticks.",
        "lol",
        "😄",
    )
    subject = ("a joke about dinosaurs pls", "What do you call a sleeping dinosaur? A dino-snore.")
    ((more,),) = ask(client, view(*asked, "go on one more"))
    (after_subject,) = ask(client, view(*subject, "another"))
    assert more["smalltalk_topic"] == "joke" and more["text"] in JOKES, more
    assert not any(a.get("smalltalk_topic") == "joke" for a in after_subject), after_subject


def test_a_goodbye_right_after_a_joke_is_no_laugh(client: ServiceClient) -> None:
    """A few words after a joke are read as a reaction to it, but not a goodbye the intents
    annotator is sure of: "aight im out, later" got "Ha! Want another one?"."""
    joke = JOKES[0]
    bye = {"intents": {"intent": "farewell", "confidence": 1.0, "method": "pattern"}}
    ((laugh,),) = ask(client, view("tell me a joke", joke, "lol ok"))
    (after_bye,) = ask(client, view("tell me a joke", joke, "aight im out, later", annotations=bye))
    assert laugh["smalltalk_topic"] == "laughed"
    assert [a.get("smalltalk_topic") for a in after_bye] != ["laughed"], after_bye


def test_bad_news_of_the_users_own_right_after_a_joke_gets_sympathy_not_another_joke(
    client: ServiceClient,
) -> None:
    """ "my dog died last week" is a few words, as a laugh is: right after a joke it got
    "Ha! Want another one?". Bad news of the user's own is no reaction to the joke; a groan
    at it ("ugh that was terrible") still is, and so is a laugh beside bad news."""
    joke = JOKES[0]
    sad = {"sentiment": {"label": "negative", "compound": -0.56}}

    def after_joke(text: str) -> dict[str, object]:
        ((answer,),) = ask(client, view("tell me a joke", joke, text, annotations=sad))
        return answer

    news = after_joke("my dog died last week")
    groan, laugh = after_joke("ugh that was terrible"), after_joke("lol my head hurts")
    assert news["smalltalk_topic"] == "empathy", news
    assert groan["smalltalk_topic"] == laugh["smalltalk_topic"] == "laughed", (groan, laugh)


def test_thanks_and_a_goodbye_right_after_a_joke_get_the_goodbye(client: ServiceClient) -> None:
    """ "thanks, bye" after a joke is a few words, as a laugh is, and the intents annotator
    reads it as thanks with a farewell also: it got "Ha! Want another one?", and elsewhere
    "You're welcome!", which left the conversation open; now a goodbye, after a joke as
    anywhere else."""
    joke = JOKES[0]
    closing = {
        "intents": {
            "intent": "thanks",
            "confidence": 1.0,
            "method": "pattern",
            "also": ["farewell"],
        }
    }
    ((elsewhere,),) = ask(client, view("How are you?", "Fine!", "thanks, bye", annotations=closing))
    ((after_joke,),) = ask(client, view("tell me a joke", joke, "thanks, bye", annotations=closing))
    assert after_joke["smalltalk_topic"] == elsewhere["smalltalk_topic"] == "farewell", after_joke


@pytest.mark.parametrize(
    "text",
    ["i dont get it lol", "didn't understand that one", "something cleaner"],
)
def test_a_joke_not_understood_or_something_else_asked_for_gets_no_line(
    client: ServiceClient, text: str
) -> None:
    """Right after a joke, a few words that say it was not understood or ask for something
    else are no laugh ("Ha! Want another one?") and no mood to answer ("i dont get it lol"
    read as bad news got "I'm sorry to hear that"), however sure the turn's reading is
    that the turn is small talk's: small talk leaves them to the LLM."""
    joke = JOKES[0]
    sure = {"intents": {"intent": None, "confidence": 0.0, "reading": {"smalltalk": 0.95}}}
    (answer,) = ask(client, view("tell me a joke", joke, text))
    (read,) = ask(client, view("tell me a joke", joke, text, annotations=sure))
    assert answer == read == [], (answer, read)
