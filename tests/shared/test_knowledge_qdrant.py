"""The retrieval protocol over a real Qdrant: its embedded local mode (qdrant-client runs
the engine in the process, on a folder), fed by the command a user runs, and searched
through the retrieval service as ``KNOWLEDGE_ENGINE=qdrant`` configures it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli.main import app as cli
from agent.sdk.testing import ServiceClient, view
from annotators.retrieval.app import RetrievalSettings, create_service, engine_for
from annotators.retrieval.test_app import build, write_base
from shared.knowledge.index import KnowledgeIndex
from shared.knowledge.qdrant import QdrantRetriever

QUESTIONS = [
    "How do I restore a backup?",
    "How much does the Pro plan cost?",
    "When is the office closed?",
    "How do I export my dialogs?",
]


@pytest.fixture(scope="module")
def index_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_base(tmp_path_factory.mktemp("kb") / "handbook")
    out = tmp_path_factory.mktemp("index") / "index.npz"
    build(folder, out)
    return out


def test_qdrant_finds_what_the_embedded_index_finds(index_file: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["knowledge", "upload", str(index_file), "--qdrant-path", str(tmp_path / "q")]
    )
    assert result.exit_code == 0, result.output
    embedded = KnowledgeIndex.load(index_file)
    total = len(embedded)
    assert f"knowledge: {total} passages uploaded" in result.output
    engine = QdrantRetriever.connect(path=tmp_path / "q")
    try:
        for question in QUESTIONS:
            ours = embedded.search(question)[0]
            theirs = engine.search(question)[0]
            assert theirs.passage == ours.passage, question
            assert theirs.cosine == pytest.approx(ours.cosine, abs=1e-4)
            assert theirs.overlap == ours.overlap
    finally:
        engine.client.close()


def test_the_service_searches_qdrant_when_configured(index_file: Path, tmp_path: Path) -> None:
    engine = QdrantRetriever.connect(path=tmp_path / "q")
    engine.upload(KnowledgeIndex.load(index_file))
    engine.client.close()
    settings = RetrievalSettings(engine="qdrant", qdrant_path=tmp_path / "q")
    service = create_service(engine_for(settings))
    with ServiceClient(service.app) as client:
        dialogs = [view("How much is the Pro plan?", "20 euros a month.", "and can I cancel it?")]
        (found,) = client.post("/respond", json={"dialogs": dialogs}).json()
    assert found["context"] == "How much is the Pro plan?"
    best = found["passages"][0]
    assert (best["source"], best["section"]) == ("handbook/pricing.html", "The Pro plan")


def test_one_place_for_qdrant_is_required() -> None:
    with pytest.raises(ValueError, match="exactly one of KNOWLEDGE_QDRANT_URL"):
        QdrantRetriever.connect()
