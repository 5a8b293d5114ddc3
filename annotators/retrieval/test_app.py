"""The retrieval annotator over real HTTP, on a knowledge base built here by the command a
user runs (``chorus knowledge build``), from files of every kind it reads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.cli.main import app as cli
from agent.sdk.testing import ServiceClient, view
from annotators.retrieval.app import ReloadingIndex, RetrievalSettings, create_service, engine_for
from shared.knowledge.index import KnowledgeIndex, build_index
from shared.knowledge.passages import MAX_FILE_BYTES, read_folder
from shared.knowledge.retrieval import TOP_K

BACKUP = """\
# Backup and restore

Chorus keeps every dialog in its store.

## Exporting

`chorus export --all -o backup.jsonl` writes every dialog and user to a file of JSON Lines.

## Restoring

To restore a backup, run `chorus import backup.jsonl`. Dialogs already stored are kept,
and the import says how many records it restored.
"""

PRICING = """\
<html><head><title>Plans</title><script>var tracking = "pricing";</script></head>
<body><nav>Home | Plans</nav>
<h1>Plans</h1>
<h2 id="pro-plan">The Pro plan</h2>
<p>The Pro plan costs 20 euros a month and includes priority support.</p>
<p>You can cancel the Pro plan at any time from your account page.</p>
<h2>The Free plan</h2>
<p>The Free plan costs nothing and holds one bot.</p>
</body></html>
"""


def write_base(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "backup.md").write_text(BACKUP)
    (folder / "pricing.html").write_text(PRICING)
    (folder / "notes.txt").write_text("The office is closed on public holidays.\n")
    (folder / "legacy.txt").write_bytes("Caf\xe9 menu: the espresso is 2 euros.".encode("latin-1"))
    (folder / "manual.pdf").write_bytes(b"%PDF-1.4 this file was cut short")
    (folder / "logo.png").write_bytes(b"\x89PNG")  # an image: not a document, not reported
    return folder


def build(folder: Path, out: Path) -> str:
    result = CliRunner().invoke(cli, ["knowledge", "build", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output


def ask(client: ServiceClient, *texts: str) -> dict[str, Any]:
    response = client.post("/respond", json={"dialogs": [view(*texts)]})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()[0]
    return answer


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_base(tmp_path_factory.mktemp("kb") / "handbook")


@pytest.fixture(scope="module")
def index_file(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index") / "handbook.npz"
    build(base, out)
    return out


@pytest.fixture(scope="module")
def client(index_file: Path) -> Any:
    settings = RetrievalSettings(index=index_file)
    with ServiceClient(create_service(engine_for(settings)).app) as client:
        yield client


def test_each_kind_of_file_becomes_passages_under_its_headings(base: Path) -> None:
    corpus = read_folder(base, prefix="handbook/")
    where = {(p.source, tuple(p.headings)) for p in corpus.passages}
    assert ("handbook/backup.md", ("Backup and restore", "Restoring")) in where
    assert ("handbook/backup.md", ("Backup and restore",)) in where
    assert ("handbook/pricing.html", ("Plans", "The Pro plan")) in where
    assert ("handbook/notes.txt", ()) in where
    restoring = next(p for p in corpus.passages if p.section == "Restoring")
    # Markdown's marks are gone, the words are kept; the link finds the section.
    assert "run chorus import backup.jsonl" in restoring.text
    assert restoring.link == "handbook/backup.md#restoring"
    pro = next(p for p in corpus.passages if p.section == "The Pro plan")
    assert pro.link == "handbook/pricing.html#pro-plan"
    html = " ".join(p.text for p in corpus.passages if p.source.endswith(".html"))
    assert "tracking" not in html and "Home | Plans" not in html  # script and navigation


def test_unreadable_files_are_named_with_the_reason_and_skipped(base: Path) -> None:
    corpus = read_folder(base, prefix="handbook/")
    assert set(corpus.skipped) == {"handbook/legacy.txt", "handbook/manual.pdf"}
    assert "not UTF-8" in corpus.skipped["handbook/legacy.txt"]
    assert "not a readable PDF" in corpus.skipped["handbook/manual.pdf"]
    assert not any(p.source.endswith((".pdf", ".png")) for p in corpus.passages)


def test_a_file_over_the_size_limit_is_skipped(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)
    (tmp_path / "small.txt").write_text("small")
    corpus = read_folder(tmp_path)
    assert "limit" in corpus.skipped["big.txt"]
    assert [p.source for p in corpus.passages] == ["small.txt"]


def test_the_build_names_the_skipped_files_and_embeds_only_what_changed(tmp_path: Path) -> None:
    folder = write_base(tmp_path / "handbook")
    out = tmp_path / "index.npz"
    first = build(folder, out)
    assert "skipped handbook/manual.pdf: not a readable PDF" in " ".join(first.split())
    total = len(KnowledgeIndex.load(out))
    assert f"{total} embedded, 0 unchanged" in first

    assert f"0 embedded, {total} unchanged, 0 removed" in build(folder, out)

    (folder / "notes.txt").write_text("The office opens at nine.\n")
    assert f"1 embedded, {total - 1} unchanged, 1 removed" in build(folder, out)
    texts = [p.text for p in KnowledgeIndex.load(out).passages]
    assert "The office opens at nine." in texts


def test_a_folder_that_does_not_exist_is_refused_by_name(tmp_path: Path) -> None:
    # a wide console: Rich wraps at 80 columns and breaks a long path (pytest's tmp_path)
    # inside a word, which would split the name the test looks for
    result = CliRunner().invoke(
        cli, ["knowledge", "build", str(tmp_path / "nowhere")], env={"COLUMNS": "1000"}
    )
    assert result.exit_code == 2
    # the console wraps the long path at its width, wherever the line ends
    assert "nowhereisnotafolderorafile" in "".join(result.output.split())


def test_the_question_finds_its_section_with_a_confident_score(client: ServiceClient) -> None:
    found = ask(client, "How do I restore a backup?")
    best = found["passages"][0]
    assert (best["source"], best["section"]) == ("handbook/backup.md", "Restoring")
    assert best["headings"] == ["Backup and restore", "Restoring"]
    assert best["link"] == "handbook/backup.md#restoring"
    assert "chorus import backup.jsonl" in best["text"]
    assert best["confidence"] >= 0.5
    # the passage's meaning is near the question's, which the knowledge skill checks
    assert best["cosine"] >= 0.25
    # six by default (KNOWLEDGE_TOP_K): the knowledge skill quotes the first, the LLM is
    # given every one it trusts
    assert len(found["passages"]) == TOP_K == 6


def test_small_talk_finds_nothing_it_is_sure_of(client: ServiceClient) -> None:
    for line in ("How are you?", "Tell me a joke", "Who won the world cup in 1998?"):
        passages = ask(client, line)["passages"]
        assert all(p["confidence"] < 0.5 for p in passages), (line, passages)


def test_a_follow_up_is_searched_with_the_question_before_it(client: ServiceClient) -> None:
    alone = ask(client, "and can I cancel it?")
    assert alone["context"] is None
    followed = ask(client, "How much is the Pro plan?", "20 euros a month.", "and can I cancel it?")
    assert followed["context"] == "How much is the Pro plan?"
    best = followed["passages"][0]
    assert (best["source"], best["section"]) == ("handbook/pricing.html", "The Pro plan")
    # One that opens with "and" follows on even when it is long (up to 16 words).
    joined = "and if I change my mind after a couple of weeks, can I still stop paying?"
    longer = ask(client, "How much is the Pro plan?", "20 euros a month.", joined)
    assert longer["context"] == "How much is the Pro plan?"
    assert longer["passages"][0]["section"] == "The Pro plan"
    # A full question of its own is not a follow-up, whatever came before.
    fresh = ask(client, "How much is the Pro plan?", "20 euros.", "How do I restore a backup?")
    assert fresh["context"] is None
    assert fresh["passages"][0]["section"] == "Restoring"
    # Nor is one that asks whether something exists, counts one of many or names the bot
    # it is talking to: it points back at nothing said before.
    for own in (
        "is there a backup command?",
        "what happens when one of the plans ends?",
        "does this bot keep a backup?",
    ):
        assert ask(client, "How much is the Pro plan?", "20 euros.", own)["context"] is None
    # "it", "there" and "one" on their own still point back.
    for back in ("would one suit a team?", "is it cheaper up there?", "can I pay for it yearly?"):
        found = ask(client, "How much is the Pro plan?", "20 euros.", back)
        assert found["context"] == "How much is the Pro plan?", back


def test_a_turn_after_one_that_asked_nothing_is_no_follow_up(client: ServiceClient) -> None:
    """After a greeting, a name or a remark, "it" is the bot the user came to ask about:
    "Hello, I'm evaluating this for our team" then "can I cancel it?" is searched alone,
    not with the greeting's words."""
    for said in ("Hello, I'm evaluating this for our team.", "Marek", "nice, thanks"):
        found = ask(client, said, "Hi! What's your name?", "and can I cancel it?")
        assert found["context"] is None, said
    asked = ask(client, "what does the Pro plan cost", "20 euros.", "and can I cancel it?")
    assert asked["context"] == "what does the Pro plan cost"


def test_a_greeting_in_front_of_the_question_is_not_searched(client: ServiceClient) -> None:
    """ "hi, how much is the Pro plan?" finds what "how much is the Pro plan?" finds: the
    greeting's words are nobody's subject, and only weakened the search."""
    alone = ask(client, "How much is the Pro plan?")
    for greeted in ("hi, How much is the Pro plan?", "hello there! How much is the Pro plan?"):
        found = ask(client, greeted)
        assert found["query"] == "How much is the Pro plan?", greeted
        assert found["passages"] == alone["passages"], greeted


def test_a_repeated_follow_up_is_searched_with_whichever_question_came_before(
    client: ServiceClient,
) -> None:
    # The service keeps its annotations of recent searches: the same words after another
    # question are another search.
    for _ in range(2):
        pricing = ask(client, "How much is the Pro plan?", "20 euros.", "and can I cancel it?")
        backup = ask(client, "How do I restore a backup?", "Like so.", "and can I cancel it?")
        assert pricing["context"] == "How much is the Pro plan?"
        assert pricing["passages"][0]["section"] == "The Pro plan"
        assert backup["context"] == "How do I restore a backup?"
        assert backup["passages"][0]["source"] == "handbook/backup.md"


def test_careless_typing_is_read_the_careful_way_but_not_the_docs_own_words(
    tmp_path: Path,
) -> None:
    """A typo is searched as the word it means, while a word the knowledge base writes
    and the English dictionary does not know is its term, searched as typed ("uvicorn"
    would read "unicorn", and find nothing)."""
    folder = write_base(tmp_path / "handbook")
    (folder / "serving.md").write_text("# Serving\n\nThe agent runs under uvicorn.\n")
    out = tmp_path / "handbook.npz"
    build(folder, out)
    with ServiceClient(create_service(engine_for(RetrievalSettings(index=out))).app) as client:
        found = ask(client, "how do i bakup my dialogs under uvicorn?")
        follow_up = ask(client, "what runs uvicorn?", "The agent.", "and can it restart it?")
        # the marks the reading sets known words aside with, typed by the user: read whole
        odd = ask(client, "uvicorn \x000\x00 bakup")
    assert found["query"] == "how do i backup my dialogs under uvicorn?"
    assert odd["query"].endswith("\x000\x00 backup")
    assert {p["source"] for p in found["passages"][:2]} == {
        "handbook/backup.md",
        "handbook/serving.md",
    }
    assert follow_up["context"] == "what runs uvicorn?"


def test_a_replaced_index_file_is_served_without_a_restart(tmp_path: Path) -> None:
    folder = write_base(tmp_path / "handbook")
    out = tmp_path / "index.npz"
    build(folder, out)
    with ServiceClient(create_service(engine_for(RetrievalSettings(index=out))).app) as client:
        before = ask(client, "When does the office open?")["passages"][0]["text"]
        assert "nine" not in before
        (folder / "notes.txt").write_text("The office opens at nine in the morning.\n")
        build(folder, out)  # written beside, renamed over the file being served
        after = ask(client, "When does the office open?")["passages"][0]
    assert after["text"] == "The office opens at nine in the morning."


def test_a_broken_replacement_leaves_the_old_index_serving(tmp_path: Path) -> None:
    folder = write_base(tmp_path / "handbook")
    out = tmp_path / "index.npz"
    build(folder, out)
    index = ReloadingIndex(out)
    assert index.search("restore a backup")[0].passage.section == "Restoring"
    broken = tmp_path / "broken"
    broken.write_bytes(b"not an index")
    os.replace(broken, out)
    assert index.search("restore a backup")[0].passage.section == "Restoring"
    assert index.loads == 1


def test_without_an_index_the_service_answers_no_passages(tmp_path: Path) -> None:
    settings = RetrievalSettings(index=tmp_path / "missing.npz")
    with ServiceClient(create_service(engine_for(settings)).app) as client:
        assert client.get("/health").json() == {
            "status": "ok",
            "service": "retrieval",
            "role": "annotator",
        }
        assert ask(client, "How do I restore a backup?")["passages"] == []


def test_a_source_folder_is_built_when_the_index_is_missing(tmp_path: Path) -> None:
    write_base(tmp_path / "mounted" / "handbook")
    out = tmp_path / "built" / "index.npz"
    settings = RetrievalSettings(index=out, source=tmp_path / "mounted")
    with ServiceClient(create_service(engine_for(settings)).app) as client:
        best = ask(client, "How do I restore a backup?")["passages"][0]
    # Named from inside the source folder, as the docs are in the compose stack.
    assert (best["source"], best["section"]) == ("handbook/backup.md", "Restoring")
    assert out.exists()


def test_an_index_of_another_format_is_refused_with_what_to_do(tmp_path: Path) -> None:
    index, _ = build_index(read_folder(write_base(tmp_path / "kb")).passages)
    out = tmp_path / "index.npz"
    index.save(out)
    other = tmp_path / "other.npz"
    other.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # an empty zip: no meta inside
    with pytest.raises(ValueError, match="not a knowledge index"):
        KnowledgeIndex.load(other)
    assert len(KnowledgeIndex.load(out)) == len(index)


def test_a_knowledge_base_over_the_passage_limit_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shared.knowledge.index

    monkeypatch.setattr(shared.knowledge.index, "MAX_PASSAGES", 3)
    folder = write_base(tmp_path / "handbook")
    result = CliRunner().invoke(cli, ["knowledge", "build", str(folder), "-o", str(tmp_path / "i")])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "over the 3 limit of one index" in said and "vector engine" in said
    assert not (tmp_path / "i").exists()
