"""The knowledge skill over real HTTP, fed the retrieval annotator's annotation as the agent
passes it on."""

from __future__ import annotations

from typing import Any

from agent.sdk.testing import ServiceClient, view
from shared.calibration import SILENT_BELOW, chance, curve_of
from shared.reading import SURE
from skills.knowledge.app import (
    ANSWER_TYPE,
    FOLLOW_UP_COSINE,
    FOLLOWED_FROM,
    FOLLOWS_DOCS_FROM,
    MAX_CONFIDENCE,
    MIN_COSINE,
    READ_PASSAGE_FROM,
    THRESHOLD,
    app,
    best_sentences,
    looks_like_code,
    sentences,
)

RESTORING = (
    "chorus import reads a backup file and stores its records. To restore a backup, run "
    "chorus import backup.jsonl with the store in --db. Dialogs already stored are kept, "
    "and the import says how many records it restored. It never deletes anything."
)


def passage(confidence: float, **fields: Any) -> dict[str, Any]:
    return {
        "source": "docs/backup.md",
        "headings": ["Backup and restore", "Restoring"],
        "section": "Restoring",
        "link": "docs/backup.md#restoring",
        "text": RESTORING,
        "score": 0.03,
        "confidence": confidence,
        **fields,
    }


def ask(question: str, *passages: dict[str, Any]) -> list[dict[str, Any]]:
    annotations = {"retrieval": {"query": question, "passages": list(passages)}}
    with ServiceClient(app) as client:
        response = client.post(
            "/respond", json={"dialogs": [view(question, annotations=annotations)]}
        )
    assert response.status_code == 200, response.text
    answer: list[dict[str, Any]] = response.json()[0]
    return answer


def test_a_confident_passage_is_quoted_with_its_source_and_section() -> None:
    (hypothesis,) = ask("How do I restore a backup?", passage(0.93), passage(0.4, section="X"))
    assert hypothesis["text"].startswith("From docs/backup.md, Restoring: ")
    assert "To restore a backup, run chorus import backup.jsonl" in hypothesis["text"]
    # the chance such an answer fits a conversation's turn, capped
    assert hypothesis["confidence"] == min(chance("knowledge", ANSWER_TYPE, 0.93), MAX_CONFIDENCE)
    assert hypothesis["routing"] == {"skill": "knowledge", "kind": ANSWER_TYPE, "raw": 0.93}
    assert hypothesis["citations"] == [
        {
            "n": 1,
            "source": "docs/backup.md",
            "section": "Restoring",
            "headings": ["Backup and restore", "Restoring"],
            "link": "docs/backup.md#restoring",
        }
    ]


def test_the_quote_is_the_passages_sentences_closest_to_the_question() -> None:
    quote = best_sentences("Are the dialogs already stored kept?", RESTORING)
    assert "Dialogs already stored are kept" in quote
    quoted = [s for s in sentences(RESTORING) if s in quote]
    assert len(quoted) == 2  # of four
    assert quoted == sorted(quoted, key=RESTORING.index)  # in the passage's order


def test_an_unsure_passage_leaves_the_turn_to_other_skills() -> None:
    assert ask("How are you?", passage(THRESHOLD - 0.01)) == []
    # over the retrieval's threshold, the calibrated chance decides (shared/calibration.json)
    assert curve_of("knowledge", ANSWER_TYPE) is not None
    unsure = next(
        r / 100 for r in range(61, 100) if chance("knowledge", ANSWER_TYPE, r / 100) < 0.5
    )
    assert unsure >= THRESHOLD
    sure = next(r / 100 for r in range(61, 100) if chance("knowledge", ANSWER_TYPE, r / 100) >= 0.5)
    assert ask("How do I restore a backup?", passage(unsure)) == []
    (hypothesis,) = ask("How do I restore a backup?", passage(sure))
    expected = min(chance("knowledge", ANSWER_TYPE, sure), MAX_CONFIDENCE)
    assert SILENT_BELOW <= hypothesis["confidence"] == expected


def conversation(previous_confidence: float, context: str | None, **fields: Any) -> dict[str, Any]:
    """A follow-up ("are they noisy?") after a question whose best passage had
    ``previous_confidence``; ``context`` is what the retrieval annotator searched it with;
    ``fields`` go on the follow-up's passage."""
    before = "Do heat pumps work in a cold climate?"
    found = [passage(0.95, **fields)]
    retrieval = {"query": "are they noisy?", "context": context, "passages": found}
    dialog = view(before, "They do.", "are they noisy?", annotations={"retrieval": retrieval})
    dialog["utterances"][0]["annotations"] = {
        "retrieval": {"query": before, "passages": [passage(previous_confidence)]}
    }
    return dialog


def test_a_follow_up_to_a_question_the_docs_did_not_answer_is_not_theirs() -> None:
    before = "Do heat pumps work in a cold climate?"
    with ServiceClient(app) as client:
        answers = client.post(
            "/respond",
            json={
                "dialogs": [
                    conversation(0.1, before),  # heat pumps: not in the docs
                    conversation(0.9, before),  # a follow-up to a docs question
                    conversation(0.1, None),  # not read as a follow-up
                ]
            },
        ).json()
    assert answers[0] == []
    assert answers[1][0]["text"].startswith("From docs/backup.md, Restoring: ")
    assert answers[2][0]["text"].startswith("From docs/backup.md, Restoring: ")


def test_a_follow_up_to_a_docs_question_whose_passage_fell_short_is_answered() -> None:
    """ "is there a Helm chart for it?" after "how does a response get chosen?", whose
    passage was under the threshold: the question before was about the docs, and the
    follow-up's own words are near its passage. After a general question ("are they
    noisy?" after heat pumps) or with its own words far from the passage, it is not."""
    before = "Do heat pumps work in a cold climate?"
    near, far = FOLLOW_UP_COSINE + 0.1, FOLLOW_UP_COSINE - 0.1
    with ServiceClient(app) as client:
        answers = client.post(
            "/respond",
            json={
                "dialogs": [
                    conversation(FOLLOWED_FROM + 0.1, before, cosine=near),
                    conversation(FOLLOWED_FROM + 0.1, before, cosine=far),
                    conversation(FOLLOWED_FROM - 0.1, before, cosine=near),
                ]
            },
        ).json()
    assert answers[0][0]["text"].startswith("From docs/backup.md, Restoring: ")
    assert answers[1] == []
    assert answers[2] == []


def test_a_follow_up_to_a_question_the_reading_took_for_the_docs_is_answered() -> None:
    """ "and slack?" after "Does it work with Telegram out of the box?": the question's
    passage fell short, but the turn's reading took it for the docs', so the follow-up is
    theirs too. The same follow-up after a question the reading gave the LLM is not."""
    dialogs = []
    for p in (FOLLOWS_DOCS_FROM + 0.1, FOLLOWS_DOCS_FROM - 0.1):
        dialog = conversation(0.1, "Do heat pumps work in a cold climate?")
        dialog["utterances"][0]["annotations"]["intents"] = {"reading": {"knowledge": p}}
        dialogs.append(dialog)
    with ServiceClient(app) as client:
        answers = client.post("/respond", json={"dialogs": dialogs}).json()
    assert answers[0][0]["text"].startswith("From docs/backup.md, Restoring: ")
    assert answers[1] == []


def test_a_turn_that_asks_nothing_is_left_to_other_skills() -> None:
    """A statement or a request for work shares the docs' words as a question does: a
    name, a remark, "add a docstring" get no passage however sure it is."""
    sure = passage(0.95, cosine=0.6)
    for said in ("Marek", "ending test", "add a docstring", "send me the last 5 dialogs"):
        assert ask(said, sure) == [], said
    for asked in ("How do I restore a backup?", "restoring a backup?", "explain restoring"):
        assert ask(asked, sure)[0]["citations"], asked


def test_a_turn_whose_meaning_is_far_from_the_passage_is_left_to_other_skills() -> None:
    # "what do you like?" matched a passage quoting it: sure of the words, not of the subject
    far = passage(0.95, cosine=MIN_COSINE - 0.2)
    assert ask("what do you like?", far) == []
    (hypothesis,) = ask("How do I restore a backup?", passage(0.95, cosine=MIN_COSINE + 0.3))
    assert hypothesis["text"].startswith("From docs/backup.md, Restoring: ")
    # an annotator that does not say the cosine is answered as before
    assert ask("How do I restore a backup?", passage(0.95))[0]["citations"]
    # a follow-up's own words say little ("and on SQLite?"): its cosine does not count
    before = "How do I restore a backup?"
    retrieval = {"query": "and on SQLite?", "context": before, "passages": [far]}
    dialog = view(
        before, "Run chorus import.", "and on SQLite?", annotations={"retrieval": retrieval}
    )
    dialog["utterances"][0]["annotations"] = {
        "retrieval": {"query": before, "passages": [passage(0.95)]}
    }
    with ServiceClient(app) as client:
        (answers,) = client.post("/respond", json={"dialogs": [dialog]}).json()
    assert answers[0]["text"].startswith("From docs/backup.md, Restoring: ")


def test_small_talk_is_left_to_its_skills_however_sure_the_passage() -> None:
    question = "How are you?"
    annotations = {
        "retrieval": {"query": question, "passages": [passage(0.95)]},
        "intents": {"intent": "how_are_you", "confidence": 1.0, "method": "pattern"},
    }
    with ServiceClient(app) as client:
        dialogs = [view(question, annotations=annotations)]
        assert client.post("/respond", json={"dialogs": dialogs}).json() == [[]]


def test_an_intent_read_only_by_likeness_leaves_the_question_to_the_docs() -> None:
    """ "hi, how do I restore a backup?" opens with a greeting, and "can a human agent take
    over a conversation?" is near "are you a human": the intents annotator reads them by
    likeness, under the skill selector's floor, and the docs answer them."""
    question = "hi, how do I restore a backup?"
    for confidence, answered in ((SURE - 0.1, True), (SURE, False)):
        annotations = {
            "retrieval": {"query": question, "passages": [passage(0.95)]},
            "intents": {"intent": "greeting", "confidence": confidence, "method": "likeness"},
        }
        with ServiceClient(app) as client:
            dialogs = [view(question, annotations=annotations)]
            (found,) = client.post("/respond", json={"dialogs": dialogs}).json()
        assert bool(found) is answered, confidence


def test_no_passages_or_no_annotation_is_silence() -> None:
    assert ask("How do I restore a backup?") == []
    with ServiceClient(app) as client:
        answer = client.post("/respond", json={"dialogs": [view("How do I restore a backup?")]})
    assert answer.json() == [[]]


def test_an_annotation_of_another_shape_is_ignored() -> None:
    broken = {"source": "docs/backup.md", "confidence": 2}
    assert ask("How do I restore a backup?", broken) == []


def test_the_quote_is_prose_not_the_commands_of_a_code_block() -> None:
    """A page's shell example shares the question's words ("backup") but reads as no answer:
    the quote is the page's sentences around it."""
    passage_text = (
        "chorus export writes dialogs to a file of JSON Lines; chorus import puts such a "
        "file back. Together they back up a store and restore it after a loss.\n\n"
        "# put it into a MongoDB: empty, or already holding other users "
        ".venv/bin/chorus import backup.jsonl --db mongodb://127.0.0.1:27017/chorus"
    )
    quote = best_sentences("How do I restore a backup?", passage_text)
    assert "restore it after a loss" in quote
    assert ".venv/bin/chorus" not in quote and "--db" not in quote
    assert looks_like_code("$ chorus run --port 5000")
    assert not looks_like_code("Give the store with --db, or set CHORUS_DB_URL.")
    assert not looks_like_code("Together they back up a store and restore it after a loss.")


def test_a_passage_of_code_alone_is_quoted_as_its_comment_and_command() -> None:
    quote = best_sentences(
        "How do I restore a backup?",
        "# put it into a MongoDB\n.venv/bin/chorus import backup.jsonl --db mongodb://db/chorus",
    )
    assert quote == (
        "Put it into a MongoDB: `.venv/bin/chorus import backup.jsonl --db mongodb://db/chorus`"
    )


def test_a_table_row_is_quoted_whole_with_its_columns_names() -> None:
    rows = (
        "key: <service>.connector.url; meaning: the service's HTTP endpoint (POST)\n\n"
        "key: <service>.connector.timeout; meaning: seconds per call; default: 2.0"
    )
    assert sentences(rows) == rows.split("\n\n")  # "<service>." does not end a sentence

    quote = best_sentences("What is the default timeout for a call to a service?", rows)

    assert "key: <service>.connector.timeout; meaning: seconds per call; default: 2.0" in quote


def test_a_sentence_that_runs_over_a_line_break_is_quoted_whole() -> None:
    """The docs wrap their prose at 90 characters; the quote ends where the sentence does,
    not at the end of a line ("... (or back) and")."""
    wrapped = (
        "Together they back up\na store, restore it after a loss, move a deployment from "
        "SQLite to MongoDB (or back) and\ncopy one user's history elsewhere."
    )

    assert sentences(wrapped) == [" ".join(wrapped.split())]
    assert best_sentences("How do I restore a backup?", wrapped).endswith("history elsewhere.")


def test_a_sure_passage_far_in_meaning_is_answered_when_the_turns_reading_is_sure() -> None:
    """ "whos behind this bot?": a question about Chorus whose sure passage is far from it
    in meaning. Where the skill's own gates are silent, the passage is answered when the
    turn's reading is sure the turn is the skill's (shared/reading.py's
    ``PASSAGES_BY_READING``), as sure as the reading, capped; an unsure reading, a passage
    under its floor (the skill's threshold: an unsure passage is often another section's),
    or a bid for work leaves the turn to others."""
    far = MIN_COSINE - 0.1

    def asked(
        confidence: float, knowledge: float, question: str = "whos behind this bot?"
    ) -> dict[str, Any]:
        reading = {"knowledge": knowledge, "faq": 0.5, "llm": 0.1}
        annotations = {
            "retrieval": {"query": question, "passages": [passage(confidence, cosine=far)]},
            "intents": {"intent": None, "confidence": 0.2, "reading": reading},
        }
        return view(question, annotations=annotations)

    assert READ_PASSAGE_FROM == THRESHOLD
    dialogs = [
        asked(0.9, 0.95),
        asked(0.9, 0.7),
        asked(0.9, 0.4),
        asked(READ_PASSAGE_FROM - 0.05, 0.95),
        # a bid for work, however sure the reading
        asked(0.9, 0.95, "can you generate the pipeline.json for me with three skills"),
    ]
    with ServiceClient(app) as client:
        answers = client.post("/respond", json={"dialogs": dialogs}).json()
    (sure,), (likely,), *silent = answers
    assert sure["text"].startswith("From docs/backup.md, Restoring: ")
    assert sure["confidence"] == MAX_CONFIDENCE
    assert sure["routing"] == {
        "skill": "knowledge",
        "kind": "by_reading",
        "raw": 0.95,
        "read": 0.95,
    }
    assert sure["citations"][0]["source"] == "docs/backup.md"
    assert likely["confidence"] == 0.7
    assert silent == [[], [], []]


def test_a_bid_for_work_is_left_to_other_skills_however_sure_the_passage() -> None:
    """ "can you write me a skill that tells the weather?" wants something made, not what
    the docs say; "can you explain how a restore works?" asks."""
    assert ask("can you write me a skill that tells the weather?", passage(0.93)) == []
    assert ask("show me the last error in the logs", passage(0.93)) == []
    (asked,) = ask("can you explain how a restore works?", passage(0.93))
    assert asked["text"].startswith("From docs/backup.md, Restoring: ")


def test_a_sure_passage_is_left_to_the_llm_where_the_reading_rules_the_docs_out() -> None:
    """ "how to answer 'what is your weakness'?" shares the docs' words: where the turn's
    reading is sure it is the LLM's alone and finds the docs unlikely
    (shared/reading.py's ``RULED_OUT_BY_READING``), the passage is not given; a reading
    less sure of the LLM leaves the answer to its curve."""
    question = "how to answer 'what is your weakness'?"

    def asked(knowledge: float, llm: float) -> dict[str, Any]:
        reading = {"knowledge": knowledge, "faq": 0.1, "llm": llm}
        annotations = {
            "retrieval": {"query": question, "passages": [passage(0.95)]},
            "intents": {"intent": None, "confidence": 0.2, "reading": reading},
        }
        return view(question, annotations=annotations)

    with ServiceClient(app) as client:
        ruled_out, weighed = client.post(
            "/respond", json={"dialogs": [asked(0.1, 0.9), asked(0.5, 0.4)]}
        ).json()
    assert ruled_out == []
    assert weighed[0]["routing"]["kind"] == ANSWER_TYPE
