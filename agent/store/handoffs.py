"""The store's part of handing dialogs to people (:mod:`agent.state.handoff`).

Each change of a handoff's state is one conditional write, so it happens once however
many agents try it at once: a request records a handoff only when the dialog has none
waiting or held, a claim takes only a waiting one, a return only one in the state the
caller names. The operations that store an utterance besides (the operator's messages,
what the agent says when it takes a dialog back) run in the user's queue
(:mod:`agent.queues`), as a turn does, so they are ordered with the user's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from agent.state.handoff import Handoff, HandoffState, ReturnedBy
from agent.state.models import BotUtterance, HumanUtterance, Utterance


class HandoffStore(Protocol):
    """The dialogs' handoffs, and the utterances written outside a turn."""

    async def request_handoff(self, handoff: Handoff) -> Handoff | None:
        """Record ``handoff`` (state ``waiting``) as the dialog's, unless it has one waiting
        or held already; the recorded one, or None when another was active (nothing is
        written then)."""
        ...

    async def claim_handoff(self, dialog_id: str, operator: str, now: datetime) -> Handoff | None:
        """The dialog's waiting handoff, now held by ``operator``: one write that succeeds
        only while it is waiting, so of two operators claiming at once one gets it and
        the other None."""
        ...

    async def return_handoff(
        self,
        dialog_id: str,
        by: ReturnedBy,
        now: datetime,
        *,
        states: Sequence[HandoffState] = ("waiting", "held"),
        operator: str | None = None,
        requested_before: datetime | None = None,
    ) -> Handoff | None:
        """The dialog's handoff, now returned to the bot, when it was in one of ``states``
        (and, with ``operator``, held by them; with ``requested_before``, asked for before
        it); None, with nothing written, otherwise."""
        ...

    async def handoff(self, dialog_id: str) -> Handoff | None:
        """The dialog's latest handoff, in any state; None when it never had one."""
        ...

    async def handoffs(
        self,
        states: Sequence[HandoffState],
        *,
        limit: int,
        requested_before: datetime | None = None,
    ) -> list[Handoff]:
        """Handoffs in ``states``, the longest waiting first, at most ``limit`` (an
        operator's inbox; the agent's look for unclaimed ones, with ``requested_before``)."""
        ...

    async def append_utterance(
        self, dialog_id: str, user_id: str, utterance: HumanUtterance | BotUtterance
    ) -> None:
        """Append an utterance to the user's open dialog outside a turn's end: a message
        of the user kept for a person, an operator's message, what the agent says when it
        takes a dialog back. Called in the user's queue. The store may give the utterance
        its id."""
        ...

    async def utterances_after(
        self, dialog_id: str, after: str | None, *, limit: int
    ) -> list[Utterance] | None:
        """The dialog's utterances stored after the one with id ``after`` (None: from its
        first), oldest first, at most ``limit``; None when ``after`` is not in the dialog."""
        ...


def claimed(handoff: Handoff, operator: str, now: datetime) -> Handoff | None:
    """``handoff`` held by ``operator`` from ``now``, as :meth:`HandoffStore.claim_handoff`
    writes it; None when it is not waiting. Each backend writes it only if the stored
    handoff is still the one read."""
    if handoff.state != "waiting":
        return None
    return handoff.model_copy(update={"state": "held", "operator": operator, "claimed_at": now})


def returned(
    handoff: Handoff,
    by: ReturnedBy,
    now: datetime,
    states: Sequence[HandoffState],
    operator: str | None,
    requested_before: datetime | None,
) -> Handoff | None:
    """``handoff`` returned to the bot, as :meth:`HandoffStore.return_handoff` asks; None
    unless it is in one of ``states``, held by ``operator`` when one is named and it is
    held, and asked for before ``requested_before``."""
    if handoff.state not in states:
        return None
    if operator is not None and handoff.state == "held" and handoff.operator != operator:
        return None
    if requested_before is not None and handoff.requested_at >= requested_before:
        return None
    return handoff.model_copy(update={"state": "returned", "returned_at": now, "returned_by": by})
