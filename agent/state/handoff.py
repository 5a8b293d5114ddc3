"""A dialog handed to a person: who asked, who holds it, since when (docs/handoff.md).

A dialog is with the bot until something asks for a person: a skill (its chosen
hypothesis carries ``handoff``), a rule of the pipeline file (``handoff.patterns``) or the
API. It is then **waiting** until an operator claims it, **held** by that operator until
they hand it back, and **returned** to the bot afterwards (by the operator, by the API, or
by the agent itself when no one claimed it within ``handoff.unclaimed_after``). While it is
waiting or held the bot answers nothing: the user's messages are stored, marked
:attr:`HumanUtterance.handed_off`, and the operator's are stored as bot utterances marked
with the operator (:attr:`BotUtterance.operator`, ``active_skill`` :data:`OPERATOR_SKILL`).

One record per dialog (the store's ``handoffs`` table or collection, keyed by the dialog's
id) holds its latest handoff; a new request after a return starts it over. Every change of
state is a conditional write in the store, so two agents, or two operators, never both
make the same change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

#: ``waiting``: asked for, no operator yet; ``held``: an operator has it; ``returned``:
#: the bot answers again.
HandoffState = Literal["waiting", "held", "returned"]
#: Who gave the dialog back: its operator (or a helpdesk through the operator routes),
#: a client of the API (``DELETE /api/dialogs/{id}/handoff``), the agent because no one
#: claimed it in time, or the user, who closed the dialog (``/start``, ``/close``).
ReturnedBy = Literal["operator", "api", "timeout", "closed"]

#: ``active_skill`` of an utterance an operator wrote.
OPERATOR_SKILL = "operator"
#: ``active_skill`` of what the agent itself says about a handoff: that a person is coming
#: (when a rule or the API asked for one) and that no one came.
HANDOFF_SKILL = "handoff"

#: An operator's name, as ``X-Operator`` sends it and an utterance keeps it.
OperatorName = Annotated[str, StringConstraints(pattern=r"^[\w.@+-]{1,64}$")]


class Handoff(BaseModel):
    """A dialog's latest handoff, as the store keeps it and the operator routes show it."""

    dialog_id: str
    user_id: str = Field(description="the client's id of the dialog's user")
    state: HandoffState
    reason: str = Field(
        default="", description="why a person was asked for, in words an operator reads"
    )
    requested_by: str = Field(
        description="what asked: skill:<name>, rule:<pattern>, or api",
    )
    requested_at: datetime
    operator: str | None = Field(
        default=None, description="who holds it (held) or held it last (returned)"
    )
    claimed_at: datetime | None = None
    returned_at: datetime | None = None
    returned_by: ReturnedBy | None = None

    @property
    def active(self) -> bool:
        """Whether the bot stays silent: the dialog is waiting for or held by a person."""
        return self.state != "returned"

    def status(self) -> HandoffStatus:
        """What a chat client is told of it."""
        return HandoffStatus(state=self.state, operator=self.operator, since=self.since)

    @property
    def since(self) -> datetime:
        """When it entered its present state."""
        if self.state == "held" and self.claimed_at is not None:
            return self.claimed_at
        if self.state == "returned" and self.returned_at is not None:
            return self.returned_at
        return self.requested_at


class HandoffStatus(BaseModel):
    """What a chat client is told about its dialog's handoff (``handoff`` in replies)."""

    state: HandoffState
    operator: str | None = Field(default=None, description="who holds the dialog, when held")
    since: datetime = Field(description="when it entered this state")
