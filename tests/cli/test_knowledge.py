"""``chorus run``'s knowledge base: the index of docs/ and README.md, built when missing,
rebuilt when a document changes, left alone when the operator serves their own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.cli.knowledge import DEFAULT_OUT, ensure_docs_index
from shared.knowledge.index import KnowledgeIndex


def checkout(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "backup.md").write_text("# Backup\n\n## Restoring\n\nRun chorus import.\n")
    (root / "README.md").write_text("# Chorus\n\nA dialogue agent.\n")
    return root


def test_the_docs_index_is_built_then_kept_then_rebuilt_when_a_doc_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KNOWLEDGE_INDEX", raising=False)
    root = checkout(tmp_path)
    done = ensure_docs_index(root)
    assert done is not None and "built from docs/ and README.md: 2 passages" in done
    index = KnowledgeIndex.load(root / DEFAULT_OUT)
    assert {(p.source, p.section) for p in index.passages} == {
        ("docs/backup.md", "Restoring"),
        ("README.md", "Chorus"),
    }

    assert ensure_docs_index(root) == f"{DEFAULT_OUT} (up to date with docs/ and README.md)"

    doc = root / "docs" / "backup.md"
    doc.write_text("# Backup\n\n## Restoring\n\nRun chorus import FILE.\n")
    later = (root / DEFAULT_OUT).stat().st_mtime + 10
    os.utime(doc, (later, later))  # newer than the index, whatever the clock's resolution
    done = ensure_docs_index(root)
    assert done is not None and "2 passages, 1 embedded" in done
    texts = [p.text for p in KnowledgeIndex.load(root / DEFAULT_OUT).passages]
    assert "Run chorus import FILE." in texts


def test_an_index_of_the_operators_own_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KNOWLEDGE_INDEX", str(tmp_path / "handbook.npz"))
    root = checkout(tmp_path / "repo")
    assert ensure_docs_index(root) is None
    assert not (root / DEFAULT_OUT).exists()


def test_the_docs_index_is_built_in_a_process_of_its_own(tmp_path: Path) -> None:
    """``chorus run`` goes on to serve in the process that asked for the build: the
    build's model, passages and libraries stay out of it (docs/performance.md, "The served
    agent's memory"), and the index it serves is built all the same."""
    import subprocess
    import sys

    root = checkout(tmp_path)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from agent.cli.knowledge import ensure_docs_index\n"
        f"print(ensure_docs_index(Path({str(root)!r})))\n"
        "print(sorted(m for m in ('wordllama', 'bm25s', 'shared.knowledge.index') "
        "if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KNOWLEDGE_INDEX"}
    repo = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    done, loaded = ran.stdout.splitlines()
    assert "built from docs/ and README.md: 2 passages, 2 embedded" in done
    assert loaded == "[]"
    assert len(KnowledgeIndex.load(root / DEFAULT_OUT)) == 2
