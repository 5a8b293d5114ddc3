"""Handing a dialog to a person and back (docs/handoff.md): the service the operator
routes, the API and the message flow share (:class:`Handoffs`), the helpdesk webhook and
the wake-ups of a dialog's followers. The state it keeps is :mod:`agent.state.handoff`'s;
the store's part is :class:`agent.store.handoffs.HandoffStore`."""

from agent.handoff.errors import HandoffConflict, HandoffError, HandoffOff, NotHandedOff
from agent.handoff.notices import Notices
from agent.handoff.service import Followed, Handoffs
from agent.handoff.webhook import Webhook

__all__ = [
    "Followed",
    "HandoffConflict",
    "HandoffError",
    "HandoffOff",
    "Handoffs",
    "NotHandedOff",
    "Notices",
    "Webhook",
]
