"""Backups of the dialogue state as JSON Lines: what ``chorus export`` writes and
``chorus import`` reads, on either store (docs/backup.md).

A backup is a header line (:class:`Header`: the format and its version), then one line per
record: a user (:class:`UserRecord`: profile and attributes) before that user's first
dialog, and a dialog (:class:`DialogRecord`) with all its utterances, exactly as
``GET /api/dialogs/{id}`` reads them (annotations, hypotheses, errors, traces, skill
selection, ratings, idempotency keys). One dialog per line keeps memory bounded whatever
the store's size: an import holds one dialog, an export a :data:`GROUP` of them (read at
once: on MongoDB one query for their utterances, which FerretDB answers by reading all
utterances stored). A dialog is the unit a store writes at once, so an import stops
between two dialogs, never inside one.

Importing is idempotent: a user or a dialog already stored (same user id, same dialog id)
is kept as it is, so importing a file twice, or a file that overlaps the store, stores
each dialog once and never overwrites newer turns.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent.sdk.errors import ChorusError
from agent.sdk.models import JsonDict
from agent.state.models import Bot, Dialog, Human, Utterance, utc_now
from agent.store.base import DialogReader, Restored, RestoreStore

#: What the header's ``format`` says: a file of something else is refused at line 1.
FORMAT: Literal["chorus-backup"] = "chorus-backup"
#: The format's version: an importer reads its own version and every earlier one.
FORMAT_VERSION = 1
#: Dialog ids read per page when exporting the whole store.
_PAGE = 200
#: Dialogs read at once when exporting the whole store (:meth:`DialogReader.dialogs`): on
#: MongoDB one query for all their utterances, which FerretDB answers by reading every
#: utterance stored; memory holds this many dialogs at most.
GROUP = 50


class BackupError(ChorusError):
    """A backup cannot be read: the message names the line and what is wrong with it."""


class Header(BaseModel):
    """The first line of a backup."""

    format: Literal["chorus-backup"] = FORMAT
    version: int = Field(default=FORMAT_VERSION, ge=1)
    exported_at: datetime = Field(default_factory=utc_now)
    #: what was exported (``--all``, users, dialogs, dates), for the reader's information
    selection: JsonDict = Field(default_factory=dict)


class UserRecord(BaseModel):
    """A user: written before the user's first dialog in the file."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["user"] = "user"
    user: Human


class DialogData(BaseModel):
    """A dialog as ``GET /api/dialogs/{id}`` reads it, without its user (who has a line of
    their own)."""

    model_config = ConfigDict(extra="forbid")

    dialog_id: str
    channel_type: str = "http_client"
    date_start: datetime
    date_finish: datetime | None = None
    rating: float | None = None
    bot: Bot = Field(default_factory=Bot)
    utterances: list[Utterance] = Field(default_factory=list)
    attributes: JsonDict = Field(default_factory=dict)
    dp_agent_id: str | None = Field(default=None, pattern="^[0-9a-f]{24}$")
    #: the experiment arm the dialog ran on (kept, so stats by arm survive a move)
    arm: str | None = Field(default=None, max_length=64)

    @classmethod
    def of(cls, dialog: Dialog) -> DialogData:
        return cls.model_validate(dialog.model_dump(exclude={"human"}))

    def with_user(self, user_id: str) -> Dialog:
        return Dialog(**dict(self), human=Human(user_external_id=user_id))


class DialogRecord(BaseModel):
    """A dialog with all its utterances, and whose it is."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["dialog"] = "dialog"
    user_id: str = Field(min_length=1)
    #: the user's open dialog when exported (a closed one has ``date_finish``)
    active: bool
    dialog: DialogData


Record = Annotated[UserRecord | DialogRecord, Field(discriminator="type")]
_record: TypeAdapter[Record] = TypeAdapter(Record)


@dataclass(frozen=True, slots=True)
class DialogFilter:
    """What to export: every dialog, or those of some users and some dialog ids; and of
    those, the ones opened from ``since`` (inclusive) until ``until`` (exclusive)."""

    users: tuple[str, ...] = ()
    dialogs: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    @property
    def everything(self) -> bool:
        return not self.users and not self.dialogs

    def admits(self, dialog: Dialog) -> bool:
        start = _aware(dialog.date_start)
        return (self.since is None or start >= self.since) and (
            self.until is None or start < self.until
        )

    def describe(self) -> JsonDict:
        described: JsonDict = {"all": self.everything}
        if self.users:
            described["users"] = list(self.users)
        if self.dialogs:
            described["dialogs"] = list(self.dialogs)
        if self.since is not None:
            described["since"] = self.since.isoformat()
        if self.until is not None:
            described["until"] = self.until.isoformat()
        return described


def _aware(moment: datetime) -> datetime:
    """A date given without a zone is UTC, as every stored date is."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else _aware(moment)


# -- export -----------------------------------------------------------------------------


async def count_dialogs(store: DialogReader, selection: DialogFilter) -> int | None:
    """How many dialogs an export will read, for its progress bar (None: not known
    without reading them, when users are named)."""
    if selection.users:
        return None
    if selection.dialogs:
        return len(selection.dialogs)
    total, offset = 0, 0
    while page := await store.list_dialog_ids(offset, _PAGE * 5, None):
        total += len(page)
        offset += len(page)
    return total


async def all_dialog_ids(store: DialogReader, page: int = _PAGE) -> AsyncIterator[str]:
    """Every dialog id, in the order the dialogs were opened, a page at a time, while the
    agent goes on serving. New dialogs come after the last one, so they are read too; an
    erased user's dialogs move the later ones back, which a plain offset would skip. So each
    page starts one id early and must begin with the last id read; when it does not, the
    last id is looked for a page further back at a time, or (erased itself) the list is read
    again from the start: a dialog read twice is harmless, since importing keeps the first
    copy, where a dialog missed would be lost from the backup."""
    offset, last = 0, None  # where the next id is, and the id before it
    while True:
        if last is None:
            ids = await store.list_dialog_ids(offset, page, None)
        else:
            ids = await store.list_dialog_ids(offset - 1, page + 1, None)
            if ids and ids[0] == last:
                ids = ids[1:]
            else:  # dialogs before it were erased
                offset = await _find_back(store, last, offset - 1, page)
                ids = await store.list_dialog_ids(offset, page, None)
        if not ids:
            return
        for dialog_id in ids:
            yield dialog_id
        offset += len(ids)
        last = ids[-1]


async def _find_back(store: DialogReader, last: str, start: int, page: int) -> int:
    """Where to go on after ``last`` once the ids before ``start`` shrank: just after it,
    found a page further back at a time; the start when it was erased itself."""
    while start > 0:
        start = max(0, start - page)
        window = await store.list_dialog_ids(start, 2 * page, None)
        if last in window:
            return start + window.index(last) + 1
    return 0


async def selected_dialogs(store: DialogReader, selection: DialogFilter) -> AsyncIterator[Dialog]:
    """The selected dialogs one at a time, read a :data:`GROUP` at a time (the store's
    whole content never in memory)."""
    if selection.everything:
        group: list[str] = []
        async for dialog_id in all_dialog_ids(store):
            group.append(dialog_id)
            if len(group) == GROUP:
                for dialog in await store.dialogs(group):  # less those erased meanwhile
                    yield dialog
                group = []
        for dialog in await store.dialogs(group):
            yield dialog
        return
    for user_id in selection.users:
        dialogs = await store.user_dialogs(user_id)
        if dialogs is None:
            raise BackupError(f"--user {user_id!r}: no such user in the store")
        for dialog in dialogs:
            yield dialog
    for dialog_id in selection.dialogs:
        found = await store.dialog(dialog_id)
        if found is None:
            raise BackupError(f"--dialog {dialog_id!r}: no such dialog in the store")
        yield found


async def export_lines(
    store: DialogReader, selection: DialogFilter, on_dialog: Callable[[], None] = lambda: None
) -> AsyncIterator[tuple[str, bool]]:
    """The backup's lines (without line ends), each with whether it is a dialog: the
    header, then each user before their first dialog and each selected dialog.
    ``on_dialog`` is called per dialog read (the progress bar), exported or filtered out by
    date."""
    yield Header(selection=selection.describe()).model_dump_json(), False
    written_users: set[str] = set()  # user ids only: bounded by the number of users
    async for dialog in selected_dialogs(store, selection):
        on_dialog()
        if not selection.admits(dialog):
            continue
        user_id = dialog.human.user_external_id
        if user_id not in written_users:
            written_users.add(user_id)
            yield UserRecord(user=dialog.human).model_dump_json(), False
        record = DialogRecord(
            user_id=user_id, active=dialog.date_finish is None, dialog=DialogData.of(dialog)
        )
        yield record.model_dump_json(), True


# -- import -----------------------------------------------------------------------------


def _problem(exc: ValidationError) -> str:
    """A validation error as one sentence: where in the record, and what is wrong."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the record"
    more = exc.error_count() - 1
    return f"{where}: {first['msg']}" + (f" (and {more} more problem(s))" if more else "")


def parse_header(number: int, text: str) -> Header:
    """The header line, or :class:`BackupError` saying why it is none."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BackupError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BackupError(
            f"line {number}: not a Chorus backup: the first line must be its header, "
            f'{{"format": "{FORMAT}", "version": {FORMAT_VERSION}, ...}} '
            "(as `chorus export` writes it)"
        )
    try:
        header = Header.model_validate(data)
    except ValidationError as exc:
        raise BackupError(f"line {number}: header: {_problem(exc)}") from None
    if header.version > FORMAT_VERSION:
        raise BackupError(
            f"line {number}: the backup is in format version {header.version}; this Chorus "
            f"reads versions up to {FORMAT_VERSION}: import it with a newer Chorus"
        )
    return header


def parse_record(number: int, text: str) -> UserRecord | DialogRecord:
    """One record line, or :class:`BackupError` naming the line and the fault."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BackupError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("type") not in ("user", "dialog"):
        raise BackupError(
            f'line {number}: a record must be a JSON object with "type": "user" or "dialog"'
        )
    try:
        return _record.validate_python(data)
    except ValidationError as exc:
        raise BackupError(f"line {number}: {data['type']} record: {_problem(exc)}") from None


def read_records(lines: Iterable[str]) -> Iterator[tuple[int, UserRecord | DialogRecord]]:
    """Every record of a backup with its line number, after checking the header; blank
    lines are skipped. Raises :class:`BackupError` at the first line that is wrong."""
    numbered = enumerate(lines, start=1)
    for number, text in numbered:
        if text.strip():
            parse_header(number, text)
            break
    else:
        raise BackupError("the file is empty: a backup starts with its header line")
    for number, text in numbered:
        if text.strip():
            yield number, parse_record(number, text)


@dataclass(slots=True)
class ImportReport:
    """What an import did, counted."""

    users_stored: int = 0
    users_present: int = 0
    dialogs_stored: int = 0
    dialogs_present: int = 0
    #: open in the backup, stored closed: the user has another open dialog in this store
    dialogs_closed: list[str] = field(default_factory=list)

    def add(self, outcome: Restored, dialog_id: str) -> None:
        if outcome is Restored.PRESENT:
            self.dialogs_present += 1
            return
        self.dialogs_stored += 1
        if outcome is Restored.STORED_CLOSED:
            self.dialogs_closed.append(dialog_id)

    def summary(self) -> str:
        text = (
            f"{self.dialogs_stored} dialog(s) stored, {self.dialogs_present} already there; "
            f"{self.users_stored} user(s) stored, {self.users_present} already there"
        )
        if self.dialogs_closed:
            text += (
                f"; {len(self.dialogs_closed)} open dialog(s) stored closed, their users "
                "having another open dialog here"
            )
        return text


async def restore(
    store: RestoreStore, record: UserRecord | DialogRecord, report: ImportReport
) -> None:
    """Store one record (each is written whole or, on MongoDB, finished by running the
    import again), counting what happened in ``report``."""
    if isinstance(record, UserRecord):
        if await store.restore_user(record.user):
            report.users_stored += 1
        else:
            report.users_present += 1
        return
    dialog = record.dialog.with_user(record.user_id)
    report.add(await store.restore_dialog(record.user_id, dialog, record.active), dialog.dialog_id)
