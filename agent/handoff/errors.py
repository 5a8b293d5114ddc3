"""Why a handoff route refuses: each error is one status (agent/api/errors.py)."""

from __future__ import annotations

from agent.sdk.errors import ChorusError


class HandoffError(ChorusError):
    """A handoff operation that cannot be done as asked."""


#: Why handoffs are off when the pipeline file has no ``handoff`` section.
NO_SECTION = "add a handoff section to the pipeline file"
#: Why they are off when it has one but the agent has no operator key: nobody could
#: claim a dialog, so the bot would fall silent until ``unclaimed_after``.
NO_OPERATOR_KEY = "set CHORUS_OPERATOR_KEY on the agent, so that an operator can claim a dialog"


class HandoffOff(HandoffError):
    """No dialog is ever handed to a person (409): the pipeline file has no ``handoff``
    section, or the agent has no operator key for anyone to claim one with."""

    def __init__(self, fix: str = NO_SECTION) -> None:
        super().__init__(f"handing dialogs to people is off: {fix} (docs/handoff.md)")


class NotHandedOff(HandoffError):
    """The dialog is not (or no longer) handed to a person, or does not exist: an operator
    sees nothing of it (404)."""

    def __init__(self, dialog_id: str) -> None:
        super().__init__(f"dialog {dialog_id} is not handed to a person")
        self.dialog_id = dialog_id


class HandoffConflict(HandoffError):
    """The handoff is not in the state the operation needs: held by another operator,
    already waiting, not claimed by this operator (409)."""
