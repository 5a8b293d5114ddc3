"""How the agent talks to services: one small protocol, an HTTP and a built-in implementation."""

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
