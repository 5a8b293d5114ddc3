"""Announcing handoffs to a helpdesk: each event POSTed to the pipeline's
``handoff.webhook``, signed with ``CHORUS_OPERATOR_KEY``, the secret the helpdesk holds to
call the operator routes back (docs/api.md has the payloads).

The body is JSON; ``X-Chorus-Signature`` is ``sha256=`` and the hex HMAC-SHA256, keyed
with the operator key, of the ``X-Chorus-Timestamp`` header's value, a dot, and the body's
bytes, so a receiver can refuse a forged body and an old one replayed. A delivery that
fails (no connection, no answer within :data:`TIMEOUT`, a 5xx, 429) is tried again after
:data:`FIRST_DELAY` seconds, then twice as long each time, :data:`TRIES` tries in all; a
4xx other than 429 means the receiver refused it and is not retried. The events of one
dialog go out one at a time, in order; a delivery given up is logged. Deliveries live in
the agent that made the event: an agent that stops drops those still being retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from typing import Any, Literal

from pydantic import SecretStr

from agent.connectors.lazy_client import LazyClient
from agent.state.handoff import Handoff
from agent.state.models import Utterance, new_id, utc_now

log = logging.getLogger("chorus.handoff")

#: Tries per delivery, the first included.
TRIES = 6
#: Seconds before the second try; each later wait is twice the one before.
FIRST_DELAY = 1.0
#: Seconds a try may take, connection to answer.
TIMEOUT = 10.0
#: Utterances of the dialog sent with ``handoff.requested``, the latest.
HISTORY = 20

WebhookEvent = Literal[
    "handoff.requested", "handoff.claimed", "handoff.message", "handoff.returned"
]


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Chorus-Signature`` of ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _utterance(utterance: Utterance) -> dict[str, Any]:
    """What the helpdesk is told of an utterance: who said what, when."""
    return {
        "utt_id": utterance.utt_id,
        "speaker": utterance.speaker,
        "text": utterance.text,
        "date_time": utterance.date_time.isoformat(),
        "operator": getattr(utterance, "operator", None),
        "active_skill": getattr(utterance, "active_skill", None),
    }


class Webhook:
    """Sends the handoffs' events; see the module docstring."""

    def __init__(
        self,
        client: LazyClient,
        url: str,
        secret: SecretStr,
        *,
        tries: int = TRIES,
        first_delay: float = FIRST_DELAY,
        timeout: float = TIMEOUT,
    ) -> None:
        self._client = client
        self._url = url
        self._secret = secret.get_secret_value().encode()
        self._tries = tries
        self._first_delay = first_delay
        self._timeout = timeout
        #: each dialog's last delivery, which its next one waits for
        self._tails: dict[str, asyncio.Task[None]] = {}
        #: every delivery not yet done, kept referenced until it is
        self._running: set[asyncio.Task[None]] = set()

    def send(
        self,
        event: WebhookEvent,
        handoff: Handoff,
        *,
        utterance: Utterance | None = None,
        history: list[Utterance] | None = None,
    ) -> None:
        """Deliver ``event`` in the background, after the dialog's earlier ones."""
        payload: dict[str, Any] = {
            "event": event,
            "delivery_id": new_id(),
            "sent_at": utc_now().isoformat(),
            "handoff": handoff.model_dump(mode="json"),
        }
        if utterance is not None:
            payload["utterance"] = _utterance(utterance)
        if history is not None:
            payload["history"] = [_utterance(u) for u in history[-HISTORY:]]
        before = self._tails.get(handoff.dialog_id)
        task = asyncio.get_running_loop().create_task(
            self._deliver(payload, before), name=f"chorus-webhook-{event}"
        )
        self._tails[handoff.dialog_id] = task
        self._running.add(task)
        task.add_done_callback(lambda done: self._forget(handoff.dialog_id, done))

    def _forget(self, dialog_id: str, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._tails.get(dialog_id) is task:
            del self._tails[dialog_id]

    async def _deliver(self, payload: dict[str, Any], before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        delay = self._first_delay
        for attempt in range(1, self._tries + 1):
            timestamp = str(int(time.time()))
            headers = {
                "Content-Type": "application/json",
                "X-Chorus-Event": payload["event"],
                "X-Chorus-Delivery": payload["delivery_id"],
                "X-Chorus-Timestamp": timestamp,
                "X-Chorus-Signature": signature(self._secret, timestamp, body),
            }
            why = await self._try(body, headers)
            if why is None:
                return
            if why.startswith("refused"):
                log.error("handoff webhook %s: %s; not retried", payload["event"], why)
                return
            if attempt < self._tries:
                log.warning(
                    "handoff webhook %s: %s; try %d of %d in %.0fs",
                    payload["event"],
                    why,
                    attempt + 1,
                    self._tries,
                    delay,
                )
                await asyncio.sleep(delay)  # the backoff between tries, not a synchronisation
                delay *= 2
        log.error("handoff webhook %s: given up after %d tries", payload["event"], self._tries)

    async def _try(self, body: bytes, headers: dict[str, str]) -> str | None:
        """None when delivered; else why not (``refused ...`` when retrying cannot help)."""
        try:
            status = await self._client.status(
                "POST", self._url, self._timeout, content=body, headers=headers
            )
        except (ConnectionError, TimeoutError) as exc:
            return f"not delivered ({exc})"
        if status < 300:
            return None
        if status == 429 or status >= 500:
            return f"answered {status}"
        return f"refused with {status}"

    async def aclose(self) -> None:
        """Stop the deliveries still running (the lifespan's end)."""
        running = list(self._running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
