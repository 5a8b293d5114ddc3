"""``chorus export`` and ``chorus import``: backups of the store as JSON Lines
(:mod:`agent.backup.files`, docs/backup.md).

Both talk to the database itself (``--db``, else ``CHORUS_DB_URL``), not to a running
agent: a backup holds what the API does not serve (the users' attributes whole, every
dialog), and a restore must work before any agent is started. Progress goes to stderr, so
that ``chorus export --all > backup.jsonl`` writes nothing else to the file.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from agent.backup.checks import (
    ImportRules,
    RecordRefused,
    check_against_store,
    check_backup,
    check_dialog,
    check_user,
)
from agent.backup.files import (
    BackupError,
    DialogFilter,
    DialogRecord,
    ImportReport,
    UserRecord,
    aware,
    count_dialogs,
    export_lines,
    read_records,
    restore,
)
from agent.settings import Settings, SettingsError, load_settings
from agent.store import Store, StoreUnavailable, open_store
from agent.store.base import DialogReader, StoreWriteRefused

err = Console(stderr=True, soft_wrap=True)
DEFAULT_DB = Settings.model_fields["db_url"].default
DbOption = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="CHORUS_DB_URL",
        help="The store to read or write: sqlite:///path/file.db or mongodb://host/db "
        "(CHORUS_DB_URL when not given).",
    ),
]


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


@asynccontextmanager
async def _opened(url: str) -> AsyncIterator[Store]:
    try:
        store = await open_store(url)
    except ValueError as exc:
        raise _fail(f"--db: {exc}", 2) from None
    try:
        yield store
    finally:
        await store.close()


def _progress(*columns: TextColumn | BarColumn | MofNCompleteColumn | DownloadColumn) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def export_command(
    all_dialogs: Annotated[
        bool, typer.Option("--all", help="Export every dialog of the store.")
    ] = False,
    user: Annotated[
        list[str] | None,
        typer.Option(help="Export this user's dialogs (the API's user_id); repeatable."),
    ] = None,
    dialog: Annotated[
        list[str] | None, typer.Option(help="Export this dialog (its dialog_id); repeatable.")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(help="Only dialogs opened at or after this date (UTC unless it says)."),
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(help="Only dialogs opened before this date (UTC unless it says)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="The file to write; standard output when not given.",
            dir_okay=False,
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Back up dialogs, their utterances and their users to JSON Lines.

    Every field is kept (annotations, hypotheses, errors, traces, ratings, attributes and
    profiles), so that `chorus import` puts them back into either store (SQLite or
    MongoDB). Choose what to export with --all, or with --user and --dialog; --since and
    --until narrow it down by the date a dialog was opened. A progress bar is shown on
    standard error.
    """
    if all_dialogs == bool(user or dialog):
        raise _fail("choose --all, or name what to export with --user and --dialog", 2)
    since, until = aware(since), aware(until)
    if since is not None and until is not None and since >= until:
        raise _fail("--since must be before --until", 2)
    selection = DialogFilter(tuple(user or ()), tuple(dialog or ()), since, until)
    target: IO[str] = (
        sys.stdout if output is None else output.open("w", encoding="utf-8", newline="\n")
    )
    try:
        exported = asyncio.run(_export(db, selection, target))
    except BackupError as exc:
        raise _fail(str(exc)) from None
    except StoreUnavailable as exc:
        raise _fail(f"the store cannot be read: {exc}") from None
    finally:
        if output is not None:
            target.close()
    where = "standard output" if output is None else str(output)
    err.print(f"exported {exported} dialog(s) to {where}", highlight=False)


async def _export(url: str, selection: DialogFilter, target: IO[str]) -> int:
    async with _opened(url) as store:
        total = await count_dialogs(store.reader, selection)
        exported = 0
        with _progress(MofNCompleteColumn()) as progress:
            task = progress.add_task("exporting dialogs", total=total)
            async for line, is_dialog in export_lines(
                store.reader, selection, lambda: progress.advance(task)
            ):
                target.write(line + "\n")
                exported += is_dialog
        target.flush()
        return exported


def import_command(
    file: Annotated[
        Path | None,
        typer.Argument(help="A backup written by `chorus export`.", exists=True, dir_okay=False),
    ] = None,
    from_dp_agent: Annotated[
        str | None,
        typer.Option(
            "--from-dp-agent",
            metavar="URL",
            help="Read DeepPavlov Agent's own database instead of a file: its MongoDB URL "
            "with the database's name, e.g. mongodb://localhost:27017/dp_agent.",
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Restore a backup written by `chorus export`, or dp-agent's dialogs, into either store
    (SQLite or MongoDB).

    A backup file is checked whole first: a line that is wrong, a value over the API's
    bounds (agent/state/storage_limits.py), or an utterance id another dialog holds stops the
    import before anything is written, with its line number and what to fix. Then each
    dialog is stored whole. Users and dialogs already in the store are kept as they are, so
    importing the same file (or the same dp-agent database) twice stores it once, and the
    store's other users stay. A progress bar is shown on standard error.
    """
    if (file is None) == (from_dp_agent is None):
        raise _fail("name a backup FILE, or a dp-agent database with --from-dp-agent", 2)
    try:
        rules = _rules()
    except SettingsError as exc:
        raise _fail(str(exc), 2) from None
    try:
        if from_dp_agent is not None:
            report = asyncio.run(_import_dp_agent(db, from_dp_agent, rules))
            source = from_dp_agent
        else:
            assert file is not None
            report = asyncio.run(_import(db, file, file.stat().st_size, rules))
            source = str(file)
    except BackupError as exc:
        raise _fail(f"{exc}; nothing was imported", 2) from None
    except StoreUnavailable as exc:
        raise _fail(
            f"a database cannot be reached: {exc}; what was imported before stays, and "
            "importing again finishes the job"
        ) from None
    except StoreWriteRefused as exc:
        raise _fail(f"{exc}; the dialogs before it are imported") from None
    err.print(f"imported {source}: {report.summary()}", highlight=False)
    for dialog_id in report.dialogs_closed:
        err.print(f"  stored closed: {dialog_id}", highlight=False)


def _rules() -> ImportRules:
    """The API's bounds, from the same ``CHORUS_*`` settings the agent reads."""
    settings = load_settings()
    return ImportRules(
        limits=settings.limits.for_client(settings.max_body_bytes),
        max_text_length=settings.max_text_length,
    )


async def _check(store: DialogReader, file: Path, size: int, rules: ImportRules) -> None:
    """Read the whole backup without writing: :class:`BackupError` at its first bad line,
    record, or utterance id that another dialog holds (:mod:`agent.backup.checks`)."""
    try:
        with _progress(DownloadColumn()) as progress:
            task = progress.add_task("checking", total=size)
            lines = _lines(file, lambda n: progress.advance(task, n))
            await check_backup(store, read_records(lines), rules)
    except BackupError as exc:
        raise BackupError(f"{file}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise BackupError(f"{file}: not UTF-8 text ({exc})") from None


async def _import_dp_agent(url: str, source_url: str, rules: ImportRules) -> ImportReport:
    """dp-agent's dialogs into the store; one it cannot read, or that breaks the checks a
    backup's dialogs are held to, is skipped and named (a user that does: with their
    dialogs)."""
    report = ImportReport()
    # Imported here: it loads PyMongo (3 MB), which the command line's other commands,
    # `chorus run` serving the agent among them, do not need.
    from agent.backup.dp_agent import DpAgentSource

    source = DpAgentSource(source_url)
    refused: dict[str, str] = {}  # user id -> why their user record was refused
    try:
        total = await source.count_dialogs()
        async with _opened(url) as store:
            with _progress(MofNCompleteColumn()) as progress:
                task = progress.add_task("importing dp-agent's dialogs", total=total)
                async for record in source.records():
                    why = await _dp_agent_problem(store.reader, record, rules, refused)
                    if why is None:
                        await restore(store.restore, record, report)
                    elif isinstance(record, DialogRecord):
                        source.skipped.append((record.dialog.dialog_id, why))
                    if isinstance(record, DialogRecord):
                        progress.advance(task)
    finally:
        await source.close()
    for dialog_id, why in source.skipped:
        err.print(f"[yellow]skipped[/yellow] dp-agent dialog {dialog_id}: {why}", highlight=False)
    return report


async def _dp_agent_problem(
    store: DialogReader,
    record: UserRecord | DialogRecord,
    rules: ImportRules,
    refused: dict[str, str],
) -> str | None:
    """Why a record read from dp-agent is not imported (None: it is), by a backup's
    checks; a refused user is remembered in ``refused``, and their dialogs are refused."""
    try:
        if isinstance(record, UserRecord):
            check_user(0, record, rules)
            return None
        if (why := refused.get(record.user_id)) is not None:
            return f"its user was refused: {why}"
        check_dialog(0, record, rules)
        await check_against_store(store, 0, record)
    except RecordRefused as exc:
        if isinstance(record, UserRecord):
            refused[record.user.user_external_id] = exc.problem
        return exc.problem
    return None


async def _import(url: str, file: Path, size: int, rules: ImportRules) -> ImportReport:
    """Check the whole file against the store, then store it record by record."""
    report = ImportReport()
    async with _opened(url) as store:
        await _check(store.reader, file, size, rules)
        with _progress(DownloadColumn()) as progress:
            task = progress.add_task("importing", total=size)
            lines = _lines(file, lambda n: progress.advance(task, n))
            for _, record in read_records(lines):
                await restore(store.restore, record, report)
    return report


def _lines(file: Path, on_bytes: Callable[[int], object]) -> Iterator[str]:
    """The file's lines, one at a time, reporting the bytes read (the progress bar)."""
    with file.open("rb") as stream:
        for raw in stream:
            on_bytes(len(raw))
            yield raw.decode("utf-8")
