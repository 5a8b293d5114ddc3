"""The stored turns a replay runs again, each with the state it started from.

A turn is a human utterance answered by the bot utterance after it. What its services saw
is rebuilt from the store: the utterances before it (as many as the candidate pipeline
reads, as the agent would have read them), the utterance itself as it arrived (its text,
id, time and attributes, without what the pipeline made of it), and the user and the bot
as they were when it started. The agent keeps those last two on the utterances
themselves (``user`` of the human utterance: the user then; ``user`` of the bot
utterance: the bot then), so the attributes are the turn's own, not today's. A turn
stored without them (imported from dp-agent or a pre-1.0.0 backup) gets the
dialog's current user and bot instead, and says so (:attr:`StoredTurn.guessed`).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Container
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import ValidationError

from agent.backup.files import GROUP, BackupError, DialogFilter, selected_dialogs
from agent.sdk.errors import ChorusError
from agent.state.models import Bot, BotUtterance, Dialog, Human, HumanUtterance
from agent.store.reader import DialogReader
from agent.turn.value import Turn


class UnknownSelection(ChorusError, LookupError):
    """A ``--user`` or ``--dialog`` that the store does not hold."""


@dataclass(frozen=True, slots=True)
class TurnFilter:
    """Which stored turns to replay: of the named users and dialogs (every dialog when
    none is named), those whose human utterance was sent from ``since`` (inclusive) until
    ``until`` (exclusive), the first ``limit`` of them."""

    users: tuple[str, ...] = ()
    dialogs: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None

    def admits(self, moment: datetime) -> bool:
        moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
        return (self.since is None or moment >= self.since) and (
            self.until is None or moment < self.until
        )


@dataclass(slots=True)
class StoredTurn:
    """One stored turn: what was stored, and the state to run the candidate on."""

    dialog_id: str
    user_id: str
    #: the turn's place in its dialog: 1 for the dialog's first answered message
    number: int
    human: HumanUtterance
    bot: BotUtterance
    #: the state the turn started from, sharing the dialog's stored objects (see :meth:`to_run`)
    turn: Turn
    #: the parts of the state not known as they were, taken as they are now
    guessed: list[str] = field(default_factory=list)
    #: the dialog's rating, as stored now
    dialog_rating: float | None = None

    def to_run(self) -> Turn:
        """The turn for an executor: copies, since an executor writes into what it is
        given (the new utterance; a dp-agent pipeline annotates the previous bot
        utterance too), and the stored turn and its dialog's other turns must not change."""
        turn = self.turn
        return Turn(
            turn.dialog_id,
            turn.human.model_copy(deep=True),
            turn.bot.model_copy(deep=True),
            [utterance.model_copy(deep=True) for utterance in turn.history],
            _as_arrived(turn.utterance),
        )


async def _selected_dialogs(reader: DialogReader, chosen: TurnFilter) -> AsyncIterator[Dialog]:
    """The named users' and dialogs' dialogs, or every dialog in the order they were
    opened, as ``chorus export`` chooses them (the dates are the turns', checked later)."""
    selection = DialogFilter(chosen.users, chosen.dialogs)
    try:
        async for dialog in selected_dialogs(reader, selection):
            yield dialog
    except BackupError as exc:  # a user or dialog the store does not hold
        raise UnknownSelection(str(exc)) from None


def _answered(dialog: Dialog) -> list[tuple[int, HumanUtterance, BotUtterance]]:
    """Each answered human utterance with its index in the dialog and its answer; an
    utterance left unanswered (interrupted, or its turn died) is no turn to compare, nor
    one a person answered (:func:`with_person`): no skill saw it, and none may now."""
    found = []
    utterances = dialog.utterances
    for index, (first, second) in enumerate(itertools.pairwise(utterances)):
        if not (isinstance(first, HumanUtterance) and isinstance(second, BotUtterance)):
            continue
        if not with_person(first, second):
            found.append((index, first, second))
    return found


def with_person(human: HumanUtterance, bot: BotUtterance) -> bool:
    """Whether the pair is a message kept for a person and an operator's words (or any
    pair of which one is): handed off, never a turn of the bot (docs/handoff.md)."""
    return human.handed_off or bot.operator is not None


def _with_person(dialog: Dialog, chosen: TurnFilter) -> int:
    """How many of the dialog's messages within ``chosen``'s dates came while a person
    held it: the turns a replay leaves out, and says so."""
    return sum(
        1
        for u in dialog.utterances
        if isinstance(u, HumanUtterance) and u.handed_off and chosen.admits(u.date_time)
    )


def _human_then(utterance: HumanUtterance, dialog: Dialog, guessed: list[str]) -> Human:
    try:
        return Human.model_validate(utterance.user)
    except ValidationError:
        guessed.append("user")
        return dialog.human.model_copy(deep=True)


def _bot_then(bot: BotUtterance, dialog: Dialog, guessed: list[str]) -> Bot:
    if bot.user:
        try:
            return Bot.model_validate(bot.user)
        except ValidationError:
            pass
    guessed.append("bot")
    return dialog.bot.model_copy(deep=True)


def _as_arrived(utterance: HumanUtterance) -> HumanUtterance:
    """The utterance as the agent stored it before running its turn: what the client
    sent, without the annotations, hypotheses, errors and trace of the stored run."""
    copied = utterance.model_copy(deep=True)
    return HumanUtterance(
        utt_id=copied.utt_id,
        text=copied.text,
        user=copied.user,
        date_time=copied.date_time,
        attributes=copied.attributes,
        message_key=copied.message_key,
    )


def dialog_turns(dialog: Dialog, chosen: Container[str], window: int) -> list[StoredTurn]:
    """The dialog's answered turns whose human utterance's id is in ``chosen``, each with
    the ``window`` utterances before it, as the agent reads them for a turn."""
    turns = []
    for number, (index, human, bot) in enumerate(_answered(dialog), start=1):
        if human.utt_id not in chosen:
            continue
        guessed: list[str] = []
        history = dialog.utterances[max(index - window, 0) : index]
        turn = Turn(
            dialog.dialog_id,
            _human_then(human, dialog, guessed),
            _bot_then(bot, dialog, guessed),
            list(history),
            human,
        )
        turns.append(
            StoredTurn(
                dialog.dialog_id,
                dialog.human.user_external_id,
                number,
                human,
                bot,
                turn,
                guessed,
                dialog.rating,
            )
        )
    return turns


@dataclass(frozen=True, slots=True)
class Selection:
    """The turns a replay runs, fixed when it starts: each chosen dialog's id (in the
    order they are replayed) with the ids of its chosen human utterances.

    The agent may go on serving from the store while the replay runs; the turns it adds
    (to new dialogs or to chosen ones) were not chosen, and the replay must not run
    them: it would then replay more turns than it said it would, of a store that was
    never in that state. Ids are what both stores can read back cheaply (dialogs by id,
    a group at a time), and a turn's id does not move when earlier ones are trimmed.
    """

    dialogs: dict[str, frozenset[str]] = field(default_factory=dict)
    #: messages of the chosen dialogs that a person answered: never replayed
    with_person: int = 0

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.dialogs.values())


async def select_turns(reader: DialogReader, chosen: TurnFilter) -> Selection:
    """The turns ``chosen`` admits now, at most ``chosen.limit`` of them: the dialogs read
    once for this, and once more as they are replayed."""
    selection: dict[str, frozenset[str]] = {}
    total = with_person = 0
    async for dialog in _selected_dialogs(reader, chosen):
        if dialog.dialog_id in selection:  # a dialog named and also a named user's
            continue
        with_person += _with_person(dialog, chosen)
        ids = [human.utt_id for _, human, _ in _answered(dialog) if chosen.admits(human.date_time)]
        if chosen.limit is not None:
            ids = ids[: chosen.limit - total]
        if ids:
            selection[dialog.dialog_id] = frozenset(ids)
            total += len(ids)
        if chosen.limit is not None and total >= chosen.limit:
            break
    return Selection(selection, with_person)


async def stored_turns(
    reader: DialogReader, selection: Selection, window: int
) -> AsyncIterator[StoredTurn]:
    """The selected turns as they are stored, dialog after dialog, each dialog's in
    order, the dialogs read a :data:`~agent.backup.files.GROUP` at a time; a dialog
    erased since the selection is left out."""
    dialog_ids = list(selection.dialogs)
    for start in range(0, len(dialog_ids), GROUP):
        for dialog in await reader.dialogs(dialog_ids[start : start + GROUP]):
            for turn in dialog_turns(dialog, selection.dialogs[dialog.dialog_id], window):
                yield turn


async def answered_turns(reader: DialogReader) -> AsyncIterator[tuple[str, str, int]]:
    """Every answered turn the store holds, as its dialog's id, its human utterance's id
    and its place in the dialog: what a label file may name."""
    async for dialog in _selected_dialogs(reader, TurnFilter()):
        for number, (_, human, _) in enumerate(_answered(dialog), start=1):
            yield dialog.dialog_id, human.utt_id, number
