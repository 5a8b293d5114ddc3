"""What the embedded index finds for questions worded unlike the docs: a value in the
middle of a long table, a word the question splits that the docs write joined, and the
definition of a term among a glossary's others."""

from __future__ import annotations

import pytest

from shared.knowledge.index import build_index, definitions
from shared.knowledge.passages import Passage, markdown_passages
from shared.knowledge.retrieval import confidence, quotes

# A settings table long enough to be cut into several passages: the row that answers
# lies far from the header that says what its cells mean.
ROWS = "\n".join(
    f"| `service.option_{n}` | what option {n} of the connector changes | `{n}` |"
    for n in range(30)
)
CONFIGURATION = f"""\
# Configuration

## The pipeline file

| key | meaning | default |
|---|---|---|
{ROWS}
| `service.connector.timeout` | seconds per call | `2.0` |

## Ports

The agent listens on port 4242; its services on 8101 and above.

## When a service fails

A call to a service that fails or takes too long is logged, and the turn goes on
without that service's answer.
"""

BACKUP = """\
# Operations

## Saving the dialogs

Take a backup with `chorus export --all -o dialogs.jsonl` every night.

## Upgrading

Stop the agent, install the new version, and start it again.
"""


def test_a_row_far_into_a_table_keeps_its_columns_names() -> None:
    passages = list(markdown_passages("docs/configuration.md", CONFIGURATION))
    table = [p for p in passages if p.section == "The pipeline file"]

    assert len(table) > 1  # cut into several passages
    row = next(p for p in table if "connector.timeout" in p.text)
    assert "key: service.connector.timeout; meaning: seconds per call; default: 2.0" in row.text
    assert row is not table[0]  # the header's names came along to a later passage


def test_the_default_timeout_of_a_call_is_found_in_its_table_row() -> None:
    index, _ = build_index(list(markdown_passages("docs/configuration.md", CONFIGURATION)))

    best = index.search("What is the default timeout for a call to a service?", k=1)[0]

    assert best.passage.section == "The pipeline file"
    assert "seconds per call" in best.passage.text


def test_a_question_that_splits_a_word_finds_the_docs_that_join_it() -> None:
    index, _ = build_index(list(markdown_passages("docs/operations.md", BACKUP)))

    best = index.search("How often should I back up?", k=1)[0]

    assert best.passage.section == "Saving the dialogs"
    assert best.lexical_rank == 0  # BM25 matched "backup", a word the question splits


# A long table: its first rows speak of services' timeouts at length and draw the search
# to the first passage cut from it, while the row that answers lies in a later passage
# among rows about other things.
DECOYS = "\n".join(
    f"| `service.retry_timeout_{n}` | after a timeout of the service, the timeout of "
    f"retry {n} of the service, counted from the service's first attempt | `{n}` |"
    for n in range(3)
)
OTHERS = "\n".join(
    f"| `ui.colour_{n}` | the colour of the page's border number {n} | `blue` |" for n in range(8)
)
TIMEOUTS = f"""\
# Configuration

## The pipeline file

| key | meaning | default |
|---|---|---|
{DECOYS}
{OTHERS}
| `service.connector.timeout` | seconds per call | `2.0` |
{OTHERS}

## Ports

The agent listens on port 4242.
"""


def test_the_answer_is_the_sections_passage_holding_the_questions_row() -> None:
    passages = list(markdown_passages("docs/configuration.md", TIMEOUTS))
    index, _ = build_index(passages)

    best = index.search("What is the default timeout for a call to a service?", k=1)[0]

    assert len([p for p in passages if p.section == "The pipeline file"]) > 1
    assert "key: service.connector.timeout; meaning: seconds per call" in best.passage.text


def test_a_passage_from_another_file_than_the_search_points_at_is_less_sure() -> None:
    index, _ = build_index(
        [
            *markdown_passages("docs/configuration.md", CONFIGURATION),
            *markdown_passages("docs/operations.md", BACKUP),
        ]
    )

    first, *others = index.search("How often should I back up the dialogs?", k=3)

    assert first.passage.source == "docs/operations.md"
    assert first.file_voted and first.margin > 0
    behind = [h for h in others if h.passage.source != first.passage.source]
    assert behind and all(not h.file_voted and h.margin < 0 for h in behind)
    assert all(confidence(h) < confidence(first) for h in behind)


def test_the_share_of_the_questions_words_in_the_passages_own_text() -> None:
    index, _ = build_index(list(markdown_passages("docs/operations.md", BACKUP)))

    # "operations" and "saving" are only in the file's name and the heading path
    best = index.search("Saving operations: which command takes a backup?", k=1)[0]

    assert best.passage.section == "Saving the dialogs"
    assert best.text_overlap < best.overlap


# A section cut into two passages: the introduction writes the verb apart ("back up"),
# and a later command line holds the noun ("backup.jsonl").
INTRODUCTION = f"""\
# Backup and restore

`chorus export` writes dialogs to a file; `chorus import` puts such a file back. Together
they back up a store and restore it after a loss. {"More about the file's format. " * 14}

```sh
.venv/bin/chorus import backup.jsonl --db sqlite:///chorus.db
```

# Upgrading

Stop the agent, install the new version, and start it again.
"""


def test_a_sections_passage_counts_the_words_its_paragraph_writes_apart() -> None:
    passages = list(markdown_passages("docs/backup.md", INTRODUCTION))
    index, _ = build_index(passages)

    best = index.search("How do I restore a backup?", k=1)[0]

    assert len([p for p in passages if p.section == "Backup and restore"]) == 2
    assert "they back up a store and restore it" in best.passage.text
    assert best.text_overlap == 1.0  # "back up" is the question's "backup"


# A glossary: one long section of definitions, cut into passages of several each, and
# pages that use its terms far more often than the glossary does.
TERMS = ["dialog", "turn", "utterance", "hypothesis", "annotator", "selector", "replay"]
GLOSSARY = "# Glossary\n\n## The ideas\n\n" + "\n\n".join(
    f"**{term}**: the {term} as the code names it, with what it holds and where it is "
    f"stored; another page says more of how a {term} is made."
    for term in [*TERMS[:3], "tier", *TERMS[3:]]
)
PIPELINE = """\
# Configuration

## Tiers: cheap skills first

A tier groups skills. Skills of tier 0 run first; a tier 1 skill runs only when no tier 0
hypothesis reached its run_below. Put the LLM skill in tier 1 and the rule skills in
tier 0, and the tier of each skill is shown by the inspector.

## Moving a skill to another tier

Change the skill's tier key in pipeline.json and restart: the tier takes effect on the
next turn, and a tier with no skill is skipped.

## A tier's timeout

Each tier waits for its skills at most its timeout; a tier that times out is logged, and
the next tier runs as if no hypothesis of that tier had come.
"""


def test_a_question_asking_what_a_term_is_finds_its_definition() -> None:
    passages = [
        *markdown_passages("docs/glossary.md", GLOSSARY),
        *markdown_passages("docs/configuration.md", PIPELINE),
    ]
    index, _ = build_index(passages)

    hits = index.search("In these docs, what is a tier?", k=3)

    # among the pages that say "tier" most, the definition is one of the three, after the
    # search's own best (the passage the knowledge skill quotes and weighs)
    assert [h.passage.source for h in hits[1:]].count("docs/glossary.md") == 1
    assert any("tier: the tier as the code names it" in h.passage.text for h in hits)
    assert hits[0].passage.section == "Tiers: cheap skills first"
    # a question that does not ask what the term is goes to the pages that use it
    used = index.search("How long does a tier wait for its skills?", k=3)
    assert "docs/glossary.md" not in [h.passage.source for h in used]


def test_the_terms_a_knowledge_base_defines() -> None:
    text = (
        "turn: one human utterance and the bot's answer to it.\n\n"
        "dream group, dream_group: the group a dp-agent pipeline puts a service under.\n\n"
        "view (of a dialog): what a service is sent of a dialog.\n\n"
        "backup.md: how to take a backup (a page, not a term).\n\n"
        "key: CHORUS_DB; meaning: the store's URL (a table's row, not a term).\n\n"
        "Nothing is defined by a sentence: it only says so."
    )
    passages = [Passage(source="docs/glossary.md", headings=["Glossary"], text=text)]

    defined = definitions(passages)

    assert set(defined) == {frozenset({"turn"}), frozenset({"dream", "group"}), frozenset({"view"})}
    assert defined[frozenset({"turn"})] == [0]


@pytest.mark.parametrize(
    ("text", "question", "quoted"),
    [
        ('Ask "What is 17 times 23?" and the LLM answers.', "what is 17 times 23", True),
        ("Try `“what is a tier”` in the chat.", "What is a  tier?", True),
        ("Ask 'How do I restore a backup'. It answers.", "How do I restore a backup?", True),
        ("What is a tier? A tier is a group of skills.", "What is a tier?", False),
        ('Ask "What is 17 times 23 and 4?"', "what is 17 times 23", False),
        ('Ask "hi"', "hi", False),
    ],
)
def test_a_passage_that_shows_the_question_as_an_example_is_told_apart(
    text: str, question: str, quoted: bool
) -> None:
    """Docs quote what users say as examples; such a passage does not answer the question
    (its confidence is 0), while one that merely uses the same words may."""
    assert quotes(text, question) is quoted
