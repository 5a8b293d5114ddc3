"""What an import checks before it writes anything (``chorus import``, docs/backup.md).

A backup is data from outside, like a request: each record is held to the bounds and id
rules the API holds clients and services to (:class:`ImportRules`), and each dialog to what
a turn can have written. Then the whole file is checked against the store and itself: an
utterance id is a record's key (``_id`` on MongoDB, unique on SQLite), so one that another
dialog holds would overwrite that dialog's utterance (MongoDB) or stop the import part-way
(SQLite); and on MongoDB an id of the form ``<dialog id>-<number>`` is how a dialog numbers
its own utterances, so one belonging to another dialog's numbering would take that
dialog's next utterance. Both are refused, naming the line, the dialog and the id, before
anything is written.

Checking a file holds each utterance id of it in memory (with its dialog's): about a
hundred bytes per utterance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from agent.backup.files import BackupError, DialogRecord, UserRecord
from agent.sdk.models import JsonDict, check_attribute_keys
from agent.state.models import BotUtterance, Human, HumanUtterance
from agent.state.storage_limits import StorageLimits, UnstorableValue
from agent.store.base import DialogReader

#: Dialog and utterance ids the API reads (``GET /api/dialogs/{id}``, ratings): Chorus's
#: and dp-agent's ids are all of this form; anything else could never be read back.
_ENTITY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: An utterance's parts that a client or a service sent: each is measured from its own
#: root, as the API measured it (the depth bound counts from there).
_SENT = frozenset({"attributes", "user", "annotations", "hypotheses"})


class RecordRefused(BackupError):
    """A record breaks a bound or an id rule: the message names the line, the record and
    what to fix; :attr:`problem` is what to fix alone."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.problem = problem


@dataclass(frozen=True, slots=True)
class ImportRules:
    """The API's bounds, as the agent's settings give them (``settings.limits`` and the rest)."""

    limits: StorageLimits = field(default_factory=StorageLimits)
    max_text_length: int = 4096


def user_id_problem(user_id: str, max_length: int) -> str | None:
    """Why ``user_id`` is not a user id the API takes (None: it is)."""
    if not user_id:
        return "user id is empty"
    if len(user_id) > max_length:
        return (
            f"user id is {len(user_id)} characters long; the limit is {max_length} "
            "(MAX_USER_ID_LENGTH)"
        )
    if not user_id.isprintable():
        return f"user id {_short(user_id)} is not printable text (no control characters)"
    return None


def _short(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 42 else shown[:39] + "..."


def _named(dialog_id: str) -> str:
    """A dialog's id as a message shows it: quoted when it is no id (it may hold anything)."""
    return dialog_id if _ENTITY_ID.fullmatch(dialog_id) else _short(dialog_id)


def _id_problem(what: str, value: str) -> str | None:
    if _ENTITY_ID.fullmatch(value):
        return None
    return f"{what} {_short(value)} is not an id the API reads: 1 to 64 letters, digits, '_' or '-'"


class _Checker:
    """One record's checks; each raises :class:`RecordRefused` with what to fix."""

    def __init__(self, rules: ImportRules, where: str) -> None:
        self.rules = rules
        self.where = where

    def refuse(self, problem: str) -> RecordRefused:
        return RecordRefused(self.where, problem)

    def measure(self, value: Any, what: str, limits: StorageLimits) -> int:
        """The value's size as JSON, within ``limits`` (whose ``max_bytes`` is the stored
        document's bound)."""
        try:
            return limits.measure(value, what, "MAX_DOCUMENT_BYTES")
        except UnstorableValue as exc:
            raise self.refuse(str(exc)) from None

    def keys(self, value: JsonDict, what: str) -> None:
        try:
            check_attribute_keys(value)
        except ValueError as exc:
            raise self.refuse(f"{what}: {exc}") from None

    def attributes(self, value: JsonDict, what: str) -> None:
        """A profile's attributes, held as a turn holds a merge into them."""
        self.keys(value, what)
        limits = self.rules.limits
        if len(value) > limits.max_attribute_keys:
            raise self.refuse(
                f"{what} hold {len(value)} keys; the limit is {limits.max_attribute_keys} "
                "(MAX_ATTRIBUTE_KEYS)"
            )
        self.measure(value, what, replace(limits, max_bytes=limits.max_document_bytes))

    def user_id(self, user_id: str, what: str) -> None:
        problem = user_id_problem(user_id, self.rules.limits.max_user_id_length)
        if problem is not None:
            raise self.refuse(f"{what}: {problem}")

    def human(self, human: Human, what: str) -> None:
        self.user_id(human.user_external_id, f"{what}.user_external_id")
        self.attributes(human.attributes, f"{what}.attributes")
        profile = human.profile.model_dump()
        self.keys(profile, f"{what}.profile")
        document = self.document_limits()
        self.measure(profile, f"{what}.profile", document)
        self.measure(human.persona, f"{what}.persona", document)
        self.measure(human.id, f"{what}.id", document)

    def document_limits(self) -> StorageLimits:
        """A whole stored record's bounds: its size as one document; items are bounded by
        that size (each service's share was bounded when it was stored)."""
        limits = self.rules.limits
        return replace(
            limits, max_bytes=limits.max_document_bytes, max_items=limits.max_document_bytes
        )


def check_user(number: int, record: UserRecord, rules: ImportRules) -> None:
    """A user record held to the API's bounds: :class:`RecordRefused` naming the fault."""
    checker = _Checker(rules, f"line {number}: user {_short(record.user.user_external_id)}")
    checker.human(record.user, "user")


def check_dialog(number: int, record: DialogRecord, rules: ImportRules) -> None:
    """A dialog record held to the API's bounds and to what a turn writes: ids the API
    reads, each utterance id once, every answer after a user's message, and each utterance
    within the bounds. :class:`RecordRefused` naming the line, the dialog and the fault."""
    dialog = record.dialog
    checker = _Checker(rules, f"line {number}: dialog {_named(dialog.dialog_id)}")
    checker.user_id(record.user_id, "user_id")
    if (problem := _id_problem("dialog_id", dialog.dialog_id)) is not None:
        raise checker.refuse(problem)
    document = checker.document_limits()
    head = dialog.model_dump(exclude={"utterances", "date_start", "date_finish"})
    checker.measure(head, "dialog", document)
    checker.keys(dialog.attributes, "dialog.attributes")
    checker.attributes(dialog.bot.attributes, "dialog.bot.attributes")
    seen: set[str] = set()
    previous: HumanUtterance | BotUtterance | None = None
    for index, utterance in enumerate(dialog.utterances):
        where = f"dialog.utterances.{index}"
        if (problem := _id_problem(f"{where}.utt_id", utterance.utt_id)) is not None:
            raise checker.refuse(problem)
        if utterance.utt_id in seen:
            raise checker.refuse(
                f"{where}.utt_id {utterance.utt_id!r} is the id of an earlier utterance of "
                "the dialog: each utterance needs its own"
            )
        seen.add(utterance.utt_id)
        if isinstance(utterance, BotUtterance) and not isinstance(previous, HumanUtterance):
            raise checker.refuse(
                f"{where} is the bot's, after "
                + ("another of the bot's" if previous is not None else "nothing")
                + ": each answer follows the user's message it answers"
            )
        if isinstance(utterance, HumanUtterance) and len(utterance.text) > rules.max_text_length:
            raise checker.refuse(
                f"{where}.text is {len(utterance.text)} characters long; the limit is "
                f"{rules.max_text_length} (CHORUS_MAX_TEXT_LENGTH)"
            )
        checker.keys(utterance.attributes, f"{where}.attributes")
        _check_utterance_size(checker, utterance, where)
        previous = utterance


def _check_utterance_size(
    checker: _Checker, utterance: HumanUtterance | BotUtterance, where: str
) -> None:
    """Each part a client or a service sent within the bounds, measured from its root as
    the API measured it, and the whole utterance within a document's size: one walk."""
    document = checker.document_limits()
    parts: dict[str, Any] = {"attributes": utterance.attributes, "user": utterance.user}
    parts |= {f"annotations[{k!r}]": v for k, v in utterance.annotations.items()}
    if isinstance(utterance, HumanUtterance):
        parts |= {f"hypotheses[{i}]": h for i, h in enumerate(utterance.hypotheses)}
    size = checker.measure(utterance.model_dump(exclude={"date_time", *_SENT}), where, document)
    for part, value in parts.items():
        shown = value.model_dump() if isinstance(value, BaseModel) else value
        size += checker.measure(shown, f"{where}.{part}", document)
    limit = document.max_bytes
    if size > limit:
        raise checker.refuse(
            f"{where}: is about {size} bytes as JSON; the limit is {limit} (MAX_DOCUMENT_BYTES)"
        )


@dataclass(slots=True)
class FileIds:
    """The dialog and utterance ids of a whole file, for the checks between its dialogs
    and against the store (see the module's docstring)."""

    #: utterance id -> (its dialog's id, its line)
    utterances: dict[str, tuple[str, int]] = field(default_factory=dict)
    dialogs: set[str] = field(default_factory=set)
    #: utterance ids of another dialog's numbering form -> (that dialog, theirs, line)
    numbered: list[tuple[str, str, str, int]] = field(default_factory=list)

    def add(self, number: int, record: DialogRecord) -> None:
        """The dialog's ids; :class:`RecordRefused` for one an earlier dialog has."""
        dialog_id = record.dialog.dialog_id
        self.dialogs.add(dialog_id)
        for utterance in record.dialog.utterances:
            utt_id = utterance.utt_id
            owner = self.utterances.setdefault(utt_id, (dialog_id, number))
            if owner[0] != dialog_id:  # the same dialog twice (an export may) is no clash
                raise RecordRefused(
                    f"line {number}: dialog {_named(dialog_id)}",
                    f"utterance id {utt_id!r} is also an utterance of dialog {_named(owner[0])} "
                    f"(line {owner[1]}): each utterance needs its own id",
                )
            prefix = numbering_of(utt_id)
            if prefix is not None and prefix != dialog_id:
                self.numbered.append((prefix, utt_id, dialog_id, number))

    def check_numbering(self) -> None:
        """After the whole file: an utterance id in the numbering of another dialog of
        the file."""
        for prefix, utt_id, dialog_id, number in self.numbered:
            if prefix in self.dialogs:
                raise _numbering_refused(number, dialog_id, utt_id, prefix)


def numbering_of(utt_id: str) -> str | None:
    """The dialog whose numbering ``utt_id`` is of (``<dialog id>-<number>``), if any."""
    prefix, dash, number = utt_id.rpartition("-")
    return prefix if dash and prefix and number.isdigit() else None


def _numbering_refused(number: int, dialog_id: str, utt_id: str, owner: str) -> RecordRefused:
    return RecordRefused(
        f"line {number}: dialog {_named(dialog_id)}",
        f"utterance id {utt_id!r} is numbered as dialog {_named(owner)}'s utterances are, and "
        "would take one of its numbers: give the utterance another id",
    )


async def check_against_store(
    store: DialogReader, number: int, record: DialogRecord, file_ids: Set[str] = frozenset()
) -> bool:
    """Whether the dialog would be stored (False: a dialog of that id is stored already,
    and the import leaves it as it is). :class:`RecordRefused` when one of its utterance
    ids is another dialog's in the store, or of the numbering of a dialog stored or named
    in ``file_ids``."""
    dialog = record.dialog
    dialog_id = dialog.dialog_id
    prefixes: dict[str, str] = {}  # dialog id -> the first utterance id of its numbering
    for utterance in dialog.utterances:
        prefix = numbering_of(utterance.utt_id)
        if prefix is not None and prefix != dialog_id:
            prefixes.setdefault(prefix, utterance.utt_id)
    stored = await store.stored_dialog_ids([dialog_id, *prefixes])
    if dialog_id in stored:
        return False
    owners = await store.utterance_dialogs([u.utt_id for u in dialog.utterances])
    for utterance in dialog.utterances:
        owner = owners.get(utterance.utt_id)
        # Its own: a restore cut short on MongoDB, which importing again finishes.
        if owner is not None and owner != dialog_id:
            raise RecordRefused(
                f"line {number}: dialog {_named(dialog_id)}",
                f"utterance id {utterance.utt_id!r} is stored in another dialog ({_named(owner)}) "
                "and would overwrite it: give the utterance another id",
            )
    for prefix, utt_id in prefixes.items():
        if prefix in stored or prefix in file_ids:
            raise _numbering_refused(number, dialog_id, utt_id, prefix)
    return True


async def check_backup(
    store: DialogReader,
    records: Iterable[tuple[int, UserRecord | DialogRecord]],
    rules: ImportRules,
) -> None:
    """Every record of a backup (with its line number) checked, and the whole file against
    the store and itself, without writing: :class:`BackupError` at the first fault."""
    file_ids = FileIds()
    for number, record in records:
        if isinstance(record, UserRecord):
            check_user(number, record, rules)
            continue
        file_ids.add(number, record)
        # A dialog stored already is left as it is: the bounds only matter for the others.
        if await check_against_store(store, number, record, file_ids.dialogs):
            check_dialog(number, record, rules)
    file_ids.check_numbering()
