"""One TLS context for every httpx client of a test process, made once.

httpx makes a new ``ssl.SSLContext`` for each ``Client``/``AsyncClient`` (and each
``httpx.get``) that is not given one, and loading certifi's bundle into it costs 30-100 ms
of CPU with OpenSSL 3, several hundred on a busy machine: more than starting the agent the
client talks to. The suite makes thousands (a client per agent, a ``httpx.get`` per
readiness poll), all over plain HTTP to 127.0.0.1, where the context is never used. So the
test process makes the default context once and hands that one out: the same settings
(certifi's bundle, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when set), made once instead of per
client. A client given its own ``verify=`` or ``cert=`` still gets its own context.

httpx offers no public hook for its default context, so this replaces the function its
transports call (``httpx._transports.default.create_ssl_context``); :func:`share` fails
loudly if a new httpx moves it, rather than letting the suite quietly slow down again.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx._config
import httpx._transports.default as transports

_made = httpx._config.create_ssl_context
_shared: dict[bool, ssl.SSLContext] = {}


def _create_ssl_context(
    verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
) -> ssl.SSLContext:
    if verify is True and cert is None:
        if trust_env not in _shared:
            _shared[trust_env] = _made(True, None, trust_env)
        return _shared[trust_env]
    return _made(verify, cert, trust_env)


def share() -> None:
    """Make httpx's transports of this process share one default TLS context."""
    if getattr(transports, "create_ssl_context", None) not in (_made, _create_ssl_context):
        raise RuntimeError(
            "httpx no longer builds its transports' TLS context with "
            "httpx._transports.default.create_ssl_context: update tests/support/tls.py"
        )
    transports.create_ssl_context = _create_ssl_context  # type: ignore[attr-defined]
