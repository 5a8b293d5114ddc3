"""The data lifecycle in the store: what is removed and when, a method per rule, and what
one pass did (:func:`agent.lifecycle.sweep` applies the rules)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Protocol

from pydantic import Field

#: One retention rule: a positive span of at most a century, or None (the rule is off). The
#: bounds are checked where the settings are read (pydantic validates this dataclass there).
_Span = Annotated[timedelta | None, Field(gt=timedelta(0), le=timedelta(days=100 * 365))]


@dataclass(frozen=True, slots=True)
class Retention:
    """What the data lifecycle removes, and when (``settings.retention``); None keeps for ever,
    so the default keeps everything, and each rule works alone."""

    #: a closed dialog is deleted whole (the dialog, its utterances and their ratings) this
    #: long after it was closed
    closed_dialogs: _Span = None
    #: an open dialog none of whose utterances is newer than this is closed
    idle_dialogs: _Span = None
    #: an answered turn this old loses its bulky parts (every hypothesis but the chosen one,
    #: annotations, trace, errors); its texts, the chosen answer, its skill and ratings stay
    compact_turns: _Span = None

    @property
    def any(self) -> bool:
        return any(
            rule is not None
            for rule in (self.closed_dialogs, self.idle_dialogs, self.compact_turns)
        )


@dataclass(slots=True)
class Swept:
    """What one pass of :func:`agent.lifecycle.sweep` did."""

    dialogs_deleted: int = 0
    utterances_deleted: int = 0
    dialogs_closed: int = 0
    utterances_compacted: int = 0
    #: every rule has looked at every record since the round began: a round is over
    round_done: bool = False


class LifecycleStore(Protocol):
    """The data lifecycle, one method per rule (:func:`agent.lifecycle.sweep` applies those
    a :class:`Retention` asks for), and the store's size. Each rule walks its records in a
    fixed order, from where its previous pass stopped, starting over after the last. None
    touches an open dialog's window but by closing it when idle, a user's profile or
    attributes, a dialog whose user has a message in the queue (a turn in flight), nor a turn
    not yet answered."""

    async def delete_closed(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Delete whole (the dialog, its utterances and their ratings) the dialogs closed
        before ``before``, looking at the next ``batch`` records of the walk; counted into
        ``swept``. True when the walk went past the last record (its round is over)."""
        ...

    async def close_idle(self, before: datetime, now: datetime, batch: int, swept: Swept) -> bool:
        """Close the open dialogs none of whose utterances is newer than ``before``, as of
        ``now``, as :meth:`delete_closed` walks its records."""
        ...

    async def compact(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Strip the bulky parts (:mod:`agent.store.compaction`) of answered turns older
        than ``before``, as :meth:`delete_closed` walks its records."""
        ...

    async def sizes(self) -> dict[str, int]:
        """Records per table or collection."""
        ...
