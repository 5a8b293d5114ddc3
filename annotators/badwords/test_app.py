"""The badwords annotator over real HTTP, and the lexicon it shares with toxicity."""

from pathlib import Path

from agent.sdk.testing import ServiceClient, view
from annotators.badwords.app import LEXICON, app
from shared.lexicon import Lexicon


def test_flags_each_dialog_in_order() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={"dialogs": [view("You are an IDIOT!!! Shut up."), view("Tell me about trains.")]},
        ).json()
    assert answer == [{"toxic": True, "words": ["idiot", "shut up"]}, {"toxic": False, "words": []}]


def test_checks_only_the_newest_utterance() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={"dialogs": [view("you moron", "That was rude.", "sorry, I take it back")]},
        ).json()
    assert answer == [{"toxic": False, "words": []}]


def test_health() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
    assert health == {"status": "ok", "service": "badwords", "role": "annotator"}


def test_bad_input_is_refused_with_a_message() -> None:
    bad = view("hi")
    bad["utterances"][0]["speaker"] = "robot"
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialogs": [bad]})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "speaker"


def test_whole_words_only() -> None:
    assert LEXICON.find("What a classy pass, let me assess it. Scunthorpe, Dickens.") == []
    assert LEXICON.find("as you wish") == []


def test_tolerates_case_plurals_stretching_and_punctuation() -> None:
    assert LEXICON.find("IDIOTS") == ["idiot"]
    assert LEXICON.find("stuuupid bitches!!!") == ["stupid", "bitch"]
    assert LEXICON.find("(moron), the idiot's idea") == ["moron", "idiot"]
    assert LEXICON.find("son-of-a-bitch") == ["son of a bitch"]  # the phrase, not "bitch"
    assert LEXICON.find("shut   UP") == ["shut up"]


def test_each_word_once_in_order_of_appearance() -> None:
    assert LEXICON.find("loser, idiot, loser") == ["loser", "idiot"]


def test_reads_comments_blank_lines_and_phrases(tmp_path: Path) -> None:
    path = tmp_path / "words.txt"
    path.write_text("# a comment\n\n  Darn  \ngosh   darn it\n# darn\n")
    lexicon = Lexicon.from_file(path)
    assert lexicon.entries == ["gosh darn it", "darn"]
    assert lexicon.find("Gosh, darn it! Darn.") == ["gosh darn it", "darn"]


def test_the_shipped_list_is_a_reasonable_size() -> None:
    assert 30 <= len(LEXICON) <= 100
