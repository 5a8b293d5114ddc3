"""``chorus knowledge build DIR``: a folder of documents into a knowledge index file.

The files are split into passages that keep their heading path
(:mod:`shared.knowledge.passages`), embedded and written as one index file
(:mod:`shared.knowledge.index`), which the retrieval annotator serves. Building again reads
the old file and embeds only new or changed passages, with a progress bar over them. A
file that cannot be read is named with the reason, never dropped silently; the build
still writes the index of the rest.

The knowledge code lives in ``shared/`` (the retrieval service's image carries it) and its
libraries are the ``services`` extra's; they are imported when the command runs, so the
rest of the command line starts without them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from shared.knowledge.index import BuildReport
    from shared.knowledge.passages import Corpus

knowledge_app = typer.Typer(
    help="Build the knowledge base the retrieval service serves (docs/knowledge.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

#: Where the index goes when --out is not given.
DEFAULT_OUT = Path(".cache/knowledge/docs.npz")


@dataclass
class Built:
    corpus: Corpus
    report: BuildReport
    seconds: float


def build(
    paths: Path | list[Path], out: Path, console: Console | None = None, base: Path | None = None
) -> Built:
    """Read ``paths`` (folders and files; sources named from ``base``, the current folder
    by default), embed what changed since ``out`` was built, write ``out``."""
    from shared.knowledge.index import build_index
    from shared.knowledge.passages import read_paths

    started = time.perf_counter()
    paths = [paths] if isinstance(paths, Path) else paths
    corpus = read_paths(paths, base or Path.cwd())
    label = ", ".join(str(p) for p in paths)
    with Progress(
        TextColumn("[bold]embedding[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=console is None,
    ) as progress:
        task = progress.add_task(f"passages of {label}", total=None)

        def advance(count: int) -> None:
            progress.update(task, advance=count)

        from shared.knowledge.index import KnowledgeIndex

        # The total is known once the old file says which passages are new.
        known = set()
        if out.exists():
            try:
                _, digests, _ = KnowledgeIndex.read(out)
                known = {str(d) for d in digests}
            except ValueError:
                known = set()
        progress.update(task, total=len({p.digest for p in corpus.passages} - known))
        index, report = build_index(corpus.passages, previous=out, progress=advance)
    index.save(out)
    return Built(corpus, report, time.perf_counter() - started)


#: The shipped bot's knowledge base: the project's own docs and README.
DOCS = (Path("docs"), Path("README.md"))


def stale(paths: list[Path], index: Path) -> bool:
    """Whether ``index`` is missing or older than one of the files of ``paths``."""
    if not index.exists():
        return True
    built = index.stat().st_mtime
    files = [f for p in paths for f in ([p] if p.is_file() else p.rglob("*"))]
    return any(f.is_file() and f.stat().st_mtime > built for f in files)


def ensure_docs_index(root: Path, console: Console | None = None) -> str | None:
    """``chorus run``'s knowledge base: the index of ``docs/`` and ``README.md`` at
    :data:`DEFAULT_OUT`, built when missing and rebuilt (only the changed passages
    embedded) when a document is newer than it. Built rather than shipped: the docs change
    with nearly every commit, and a shipped index would answer from the docs as they were.
    Nothing is done when ``KNOWLEDGE_INDEX`` names another index (the operator's own
    knowledge base). Returns what was done, for the start-up lines.

    The build runs in a process of its own (:func:`_built_apart`): built in the agent's,
    its passages, embeddings and libraries stayed in the served agent's memory, 10.7 MB
    more than an agent started on a built index (docs/performance.md, "The served agent's
    memory")."""
    import os

    paths = [root / p for p in DOCS if (root / p).exists()]
    if os.environ.get("KNOWLEDGE_INDEX") or not paths:
        return None
    out = root / DEFAULT_OUT
    if not stale(paths, out):
        return f"{DEFAULT_OUT} (up to date with docs/ and README.md)"
    passages, embedded, seconds = _built_apart(paths, out, root, progress=console is not None)
    return (
        f"{DEFAULT_OUT} built from docs/ and README.md: {passages} passages, "
        f"{embedded} embedded, in {seconds:.1f}s"
    )


def _built_apart(
    paths: list[Path], out: Path, base: Path, *, progress: bool
) -> tuple[int, int, float]:
    """:func:`build` in a new process (spawned, not forked: the caller may run threads),
    its progress bar on standard error when ``progress``: the passages, how many were
    embedded, the seconds. An error of the build is raised here as it was raised there."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as child:
        return child.submit(_build_figures, paths, out, base, progress).result()


def _build_figures(
    paths: list[Path], out: Path, base: Path, progress: bool
) -> tuple[int, int, float]:
    """:func:`build`'s figures, for :func:`_built_apart`'s process."""
    built = build(paths, out, Console(stderr=True) if progress else None, base=base)
    return built.report.passages, built.report.embedded, built.seconds


@knowledge_app.command("build")
def build_command(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Folders and files of Markdown, HTML, text and PDF.", metavar="PATHS"),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The index file to write (or update).")
    ] = DEFAULT_OUT,
) -> None:
    """Split the documents into passages, embed what changed, write the index.

    Sources are named by their path from the current folder ("docs/backup.md"), or, outside
    it, from their folder's parent ("handbook/backup.md")."""
    from shared.knowledge.index import IndexError_
    from shared.knowledge.passages import UnreadableFile

    console = Console(stderr=True, soft_wrap=True)  # a path is never broken mid-name
    try:
        built = build(paths, out, console)
    except (UnreadableFile, IndexError_) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    for source, why in built.corpus.skipped.items():
        console.print(f"[yellow]skipped[/] {source}: {why}")
    report = built.report
    files = len({p.source for p in built.corpus.passages})
    typer.echo(
        f"{out}: {report.passages} passages from {files} files "
        f"({report.embedded} embedded, {report.reused} unchanged, {report.removed} removed, "
        f"{len(built.corpus.skipped)} files skipped) in {built.seconds:.1f}s"
    )


@knowledge_app.command("upload")
def upload_command(
    index: Annotated[Path, typer.Argument(help="The index file chorus knowledge build wrote.")],
    qdrant_url: Annotated[
        str | None, typer.Option(help="A Qdrant server, e.g. http://127.0.0.1:6333.")
    ] = None,
    qdrant_path: Annotated[
        Path | None, typer.Option(help="A folder for Qdrant's embedded local mode.")
    ] = None,
    collection: Annotated[
        str, typer.Option(help="The collection to create (or replace).")
    ] = "knowledge",
) -> None:
    """Put an index into a Qdrant collection (KNOWLEDGE_ENGINE=qdrant searches it)."""
    from shared.knowledge.index import IndexError_, KnowledgeIndex
    from shared.knowledge.qdrant import QdrantRetriever

    console = Console(stderr=True, soft_wrap=True)  # a path is never broken mid-name
    try:
        loaded = KnowledgeIndex.load(index)
        engine = QdrantRetriever.connect(url=qdrant_url, path=qdrant_path, collection=collection)
    except (IndexError_, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    engine.upload(loaded)
    typer.echo(f"{collection}: {len(loaded)} passages uploaded")
