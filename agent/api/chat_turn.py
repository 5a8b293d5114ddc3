"""What the chat endpoints share (``POST /``, ``POST /api/v1/chat``, ``/chat/ws``): a
message checked as each of them checks it. Each endpoint then awaits the flow's
:class:`~agent.flow.Answer` (:meth:`~agent.flow.MessageFlow.reply`) and shapes it into its
own reply itself; the flow is given no callback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from agent.api.request_limits import attributes_or_422, check_text, check_user_id
from agent.flow import Incoming
from agent.idempotency import fingerprint
from agent.settings import Settings
from agent.turn.config import DoubleTexting


def incoming(
    settings: Settings,
    request: BaseModel,
    *,
    endpoint: str,
    user_id: str,
    text: str,
    text_field: str,
    attributes: Callable[[], dict[str, Any]],
    key: str | None,
    message_id: str | None,
    reward: float | None = None,
    close_after: bool = False,
    closing_commands: bool = False,
    double_texting: DoubleTexting | None = None,
) -> Incoming:
    """The message, or the 422 that says what to fix. ``endpoint`` (``chat``, ``observe``)
    keeps the endpoints' idempotency keys apart; the key is the ``Idempotency-Key`` header,
    else the body's ``message_id``, and a retry must repeat ``request`` (less its
    ``message_id``)."""
    check_user_id(user_id, settings.limits.max_user_id_length)
    check_text(text, settings.max_text_length, text_field)
    stored = attributes_or_422(attributes, settings.limits.for_client(settings.max_body_bytes))
    chosen = key or message_id
    return Incoming(
        user_id,
        text,
        stored,
        key=f"{endpoint}:{chosen}" if chosen else None,
        fingerprint=(
            fingerprint(request.model_dump(mode="json", exclude={"message_id"})) if chosen else ""
        ),
        reward=reward,
        close_after=close_after,
        closing_commands=closing_commands,
        double_texting=double_texting,
    )
