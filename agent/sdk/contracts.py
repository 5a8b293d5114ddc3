"""What a handler of each role must be, checked when it is decorated and when it answers.

A handler with the wrong arguments is refused at import, by :func:`check_signature`, with a
message naming it: the author finds out when the service starts, not when the first turn
reaches it. A handler that answers outside its role's contract (a skill's ``confidence: 2``)
raises :class:`ContractError`; the service answers it as a 500 that carries pydantic's own
words and the :data:`CONTRACT_HEADER`, and the agent records the service's
``bad_response`` with those words (agent/connectors/http.py) instead of a bare status.

The Protocols are what a type checker sees: decorating a function whose signature does not
fit its role is a mypy error too.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol

from pydantic import ValidationError

from agent.sdk.errors import ChorusError
from agent.sdk.models import DialogView, HypothesisView, Selection, SkillHypothesis, SkillSelection
from agent.sdk.roles import Role, singular
from agent.sdk.streaming import StreamEnd, StreamStart

#: Set on a service's answer when its handler broke the role's contract; the body's
#: ``message`` says how.
CONTRACT_HEADER = "Chorus-Contract-Error"

__all__ = [
    "CONTRACT_HEADER",
    "AnnotatorHandler",
    "CandidateAnnotatorHandler",
    "ContractError",
    "HandlerSignatureError",
    "ResponseSelectorHandler",
    "SkillHandler",
    "SkillSelectorHandler",
    "check_signature",
    "describe_validation",
]


class AnnotatorHandler(Protocol):
    """An annotator or response annotator: any JSON about the dialog."""

    def __call__(self, dialog: DialogView, /) -> Any: ...


class SkillHandler(Protocol):
    """A skill: its hypotheses (or one), an awaitable of them, or an async generator that
    streams one hypothesis (a ``StreamStart``, then its text in pieces, maybe a last
    ``StreamEnd``)."""

    def __call__(
        self, dialog: DialogView, /
    ) -> (
        list[SkillHypothesis]
        | SkillHypothesis
        | Awaitable[list[SkillHypothesis]]
        | Awaitable[SkillHypothesis]
        | AsyncIterator[StreamStart | str]
        | AsyncIterator[StreamStart | str | StreamEnd]
    ): ...


class CandidateAnnotatorHandler(Protocol):
    """A candidate annotator: any JSON about one hypothesis, called once per hypothesis."""

    def __call__(self, dialog: DialogView, hypothesis: HypothesisView, /) -> Any: ...


class SkillSelectorHandler(Protocol):
    """A skill selector: the skills to run, by name or as a :class:`SkillSelection`."""

    def __call__(
        self, dialog: DialogView, /
    ) -> list[str] | SkillSelection | Awaitable[list[str]] | Awaitable[SkillSelection]: ...


class ResponseSelectorHandler(Protocol):
    """A response selector: the chosen hypothesis' index, or a :class:`Selection`."""

    def __call__(
        self, dialog: DialogView, /
    ) -> Selection | int | Awaitable[Selection] | Awaitable[int]: ...


#: The positional arguments each role's handler is called with.
_ARGUMENTS: dict[Role, tuple[str, ...]] = {
    "annotators": ("dialog",),
    "skill_selectors": ("dialog",),
    "skills": ("dialog",),
    "candidate_annotators": ("dialog", "hypothesis"),
    "response_selectors": ("dialog",),
    "response_annotators": ("dialog",),
}


class HandlerSignatureError(ChorusError, TypeError):
    """A decorated function cannot be called as its role calls it; raised at decoration."""


class ContractError(ChorusError, ValueError):
    """A handler answered outside its role's contract; ``message`` is pydantic's account."""

    def __init__(self, service: str, role: Role, handler: str, detail: str) -> None:
        self.message = f"{singular(role)} {service!r} ({handler}) broke its contract: {detail}"
        super().__init__(self.message)


def handler_name(fn: Any) -> str:
    """``module.qualname`` of a handler, how an author finds it in their code."""
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}"


def check_signature(service: str, role: Role, fn: Any) -> None:
    """Refuse a handler its role could not call, naming it and the signature it needs."""
    arguments = _ARGUMENTS[role]
    wanted = f"def handler({', '.join(arguments)})"
    where = f"{singular(role)} handler {handler_name(fn)} of service {service!r}"
    if not callable(fn):
        raise HandlerSignatureError(f"{where} is a {type(fn).__name__}, not a function: {wanted}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none: let them through
        return
    try:
        signature.bind(*arguments)
    except TypeError as exc:
        raise HandlerSignatureError(
            f"{where} cannot be called with {len(arguments)} positional argument(s) "
            f"({', '.join(arguments)}): {exc}; write it as {wanted}"
        ) from None


def describe_validation(exc: ValidationError) -> str:
    """Pydantic's errors on one line: ``0.confidence: Input should be ...; ...``."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "answer"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
