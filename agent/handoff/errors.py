"""Why a handoff route refuses: each error is one status (agent/api/errors.py)."""

from __future__ import annotations

from agent.sdk.errors import ChorusError


class HandoffError(ChorusError):
    """A handoff operation that cannot be done as asked."""


class HandoffOff(HandoffError):
    """The pipeline file has no ``handoff`` section: no dialog is ever handed to a person
    (409)."""

    def __init__(self) -> None:
        super().__init__(
            "handing dialogs to people is off: add a handoff section to the pipeline file "
            "(docs/handoff.md)"
        )


class NotHandedOff(HandoffError):
    """The dialog is not (or no longer) handed to a person, or does not exist: an operator
    sees nothing of it (404)."""

    def __init__(self, dialog_id: str) -> None:
        super().__init__(f"dialog {dialog_id} is not handed to a person")
        self.dialog_id = dialog_id


class HandoffConflict(HandoffError):
    """The handoff is not in the state the operation needs: held by another operator,
    already waiting, not claimed by this operator (409)."""
