"""Why a service gave no usable output. Every branch carries the service's name.

    ServiceError
     ├── ServiceTimeout       no answer within the service's timeout (or the turn's deadline)
     ├── ServiceUnavailable   could not connect, or the connection broke
     ├── BadServiceStatus     answered with a non-2xx status
     ├── BadServiceResponse   answered 2xx, but not JSON, too big, or the wrong shape
     └── RefusedOutput        (agent/turn/limits.py) the output broke a rule of the state

The executor turns each into a :class:`agent.state.ServiceFailure` on the utterance;
none of them ever reaches the client as a 500. The whole tree of Chorus's errors is drawn
in :mod:`agent.sdk.errors`.
"""

from __future__ import annotations

from typing import ClassVar

from agent.sdk.errors import ChorusError
from agent.state.models import FailureKind
from agent.telemetry import printable

#: The message of the cancellation that drops a speculative skill's call (a cheaper skill
#: answered first), for whoever reads it in a traceback. The call did not fail: its
#: service's circuit breaker counts no cancellation but the call's own time limit
#: (:mod:`agent.connectors.breaker`).
DROPPED = "dropped: a cheaper skill answered first"


class ServiceError(ChorusError):
    """Base of all service faults."""

    kind: ClassVar[FailureKind] = "bad_response"

    def __init__(self, service: str, message: str) -> None:
        super().__init__(f"{service}: {message}")
        self.service = service
        self.message = message


class ServiceTimeout(ServiceError):
    kind = "timeout"


class ServiceUnavailable(ServiceError):
    kind = "unavailable"

    def __init__(self, service: str, message: str, *, never_connected: bool = False) -> None:
        super().__init__(service, message)
        #: the connection could not be opened: the service never saw the request
        self.never_connected = never_connected


class BadServiceStatus(ServiceError):
    kind = "bad_status"

    def __init__(self, service: str, status_code: int, body: str) -> None:
        super().__init__(service, f"answered HTTP {status_code}: {printable(body, 200)}")
        self.status_code = status_code


class BadServiceResponse(ServiceError):
    kind = "bad_response"
