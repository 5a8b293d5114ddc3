"""Each role's output, checked before any of it touches the state.

A function here either returns the typed output or raises :class:`BadServiceResponse`
(wrong shape) / :class:`RefusedOutput` (a write outside the service's own slot).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent.connectors.errors import BadServiceResponse
from agent.sdk.models import Selection, SkillHypothesis, SkillSelection
from agent.state.models import Hypothesis
from agent.turn.limits import RefusedOutput

_hypotheses = TypeAdapter(list[SkillHypothesis])
_skill_names = TypeAdapter(list[str] | SkillSelection)
#: Fields of a stored hypothesis that only the agent sets.
_AGENT_FIELDS = frozenset({"skill_name", "annotations"})


def _short(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "answer"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def skill_hypotheses(service: str, output: Any) -> list[Hypothesis]:
    """A skill answers a list of hypotheses (a single object is taken as a list of one)."""
    if isinstance(output, dict):
        output = [output]
    try:
        parsed = _hypotheses.validate_python(output)
    except ValidationError as exc:
        raise BadServiceResponse(service, f"not a list of hypotheses: {_short(exc)}") from None
    result = []
    for hypothesis in parsed:
        reserved = _AGENT_FIELDS & set(hypothesis.model_extra or {})
        if reserved:
            raise RefusedOutput(
                service, f"a skill cannot set {', '.join(sorted(reserved))} on its hypothesis"
            )
        result.append(Hypothesis(skill_name=service, **hypothesis.model_dump()))
    return result


def selected_skills(service: str, output: Any) -> SkillSelection:
    """A skill selector answers skill names, or ``{"skills": [...], "reason": "...",
    "decides": [...]}``; names alone decide about every skill."""
    try:
        chosen = _skill_names.validate_python(output)
    except ValidationError as exc:
        raise BadServiceResponse(
            service, f"not a list of skill names nor a skill selection: {_short(exc)}"
        ) from None
    return SkillSelection(skills=chosen) if isinstance(chosen, list) else chosen


def selection(service: str, output: Any, hypotheses: int) -> Selection:
    """A response selector answers an index, or ``{"index": i, "reason": "..."}``."""
    if isinstance(output, int) and not isinstance(output, bool):
        output = {"index": output}
    try:
        chosen = Selection.model_validate(output)
    except ValidationError as exc:
        raise BadServiceResponse(service, f"not a selection: {_short(exc)}") from None
    if chosen.index >= hypotheses:
        raise BadServiceResponse(service, f"chose hypothesis {chosen.index} of {hypotheses}")
    return chosen


def candidate_annotations(service: str, output: Any, hypotheses: int) -> list[Any]:
    """A candidate annotator answers one annotation per hypothesis, in order."""
    if not isinstance(output, list) or len(output) != hypotheses:
        got = f"{len(output)} items" if isinstance(output, list) else type(output).__name__
        raise BadServiceResponse(
            service, f"expected a list of {hypotheses} annotations, one per hypothesis; got {got}"
        )
    return output
