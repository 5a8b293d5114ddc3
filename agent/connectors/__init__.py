"""How the agent calls services: one protocol (call, stream, aclose) for both kinds of
pipeline, HTTP over a transport (the agent's own HTTP/1.1 pool, or in memory for tests),
built-ins, the batcher and the circuit breaker."""

from agent.connectors.base import Connector
from agent.connectors.errors import (
    BadServiceResponse,
    BadServiceStatus,
    ServiceError,
    ServiceTimeout,
    ServiceUnavailable,
)

__all__ = [
    "BadServiceResponse",
    "BadServiceStatus",
    "Connector",
    "ServiceError",
    "ServiceTimeout",
    "ServiceUnavailable",
]
