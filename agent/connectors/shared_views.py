"""Whether an in-process service is shown the turn's views themselves or copies of them.

A view shares its annotations and attributes with the turn's state, and the services of
a stage are shown the same view (agent/pipeline/executor.py). Over HTTP a service parses
its own copy from the request; in the agent's process it is given one too, so that what
a handler changes in its view reaches neither the turn's state nor what it or another
service is shown next. That copy (a dump and a validation of every view, a dozen a cheap
turn, the bot's persona in each) was the largest single cost of the in-process
connector (docs/performance.md, "Half the CPU").

Most handlers only read their view. A service whose author promises so
(``Service(..., never_changes_view=True)``: no field set, nothing added to or taken from
its lists and dicts, no part of it kept past the call) is shown the views themselves,
once its first :data:`TRIAL_CALLS` calls, given copies, have left them as they were; after
that, every :data:`CHECK_EVERY`-th call is still given a copy and checked. A call found to
have changed its copy breaks the promise: the service is named in the log and given
copies from then on. A promise broken on a call that was not checked changes the turn's
state (an attribute set in the view is stored with the turn): make none for a handler
that writes into what it is given.

A handler that runs off the event loop (a sync handler in its threads) and a batch of
several dialogs (their handlers run as tasks, interleaved with other work) are always
given copies: a view's dicts are the turn's, which the loop writes meanwhile.
"""

from __future__ import annotations

import logging
from typing import Any

from agent.sdk.models import DialogView

log = logging.getLogger("chorus.connectors")

#: A promising service's first calls, given copies and checked, before it sees the views.
TRIAL_CALLS = 8
#: After the trial, one call in this many is still given copies and checked.
CHECK_EVERY = 64


def copied(views: list[DialogView]) -> list[DialogView]:
    """The views as the service would parse them, in containers of their own:
    ``model_dump`` then ``model_validate`` is the cheapest deep copy measured
    (docs/performance.md, "Half the CPU")."""
    return [DialogView.model_validate(view.model_dump()) for view in views]


class SharedViews:
    """One service's views: shared or copied, and its promise checked (module docstring)."""

    def __init__(self, service: str, *, promised: bool) -> None:
        self.service = service
        #: whether the service promised never to change its view, and has kept it so far
        self.promised = promised
        self._calls = 0

    def shown(
        self, views: list[DialogView], *, on_loop: bool
    ) -> tuple[list[DialogView], list[Any] | None]:
        """What the service is shown for ``views``, and, for a checked call, the copies'
        dumps to give :meth:`check` after it (None: nothing to check). ``on_loop``:
        whether its handler runs on the event loop, for one dialog."""
        if not self.promised:
            return copied(views), None
        calls = self._calls = self._calls + 1
        if on_loop and calls > TRIAL_CALLS and calls % CHECK_EVERY:
            return views, None
        copies = copied(views)
        return copies, [copy.model_dump() for copy in copies]

    def check(self, copies: list[DialogView], before: list[Any] | None) -> None:
        """After a checked call: a copy that changed breaks the service's promise."""
        if before is None or not self.promised:
            return
        if [copy.model_dump() for copy in copies] != before:
            self.promised = False
            log.error(
                "in-process service %s changed the view it was shown, though it promised "
                "not to (never_changes_view): it is shown copies from now on",
                self.service,
            )
