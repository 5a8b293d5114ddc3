"""The service SDK: write an annotator, skill or selector as one typed function.

Importable on its own (it needs pydantic and FastAPI, not the agent's server or store),
so a service's container carries only ``agent/sdk`` and its own folder, and a team writing
services elsewhere installs only its wheel, ``chorus-sdk`` (sdk/pyproject.toml).
"""

from agent.sdk.models import (
    BotView,
    DialogView,
    HumanView,
    HypothesisView,
    Selection,
    ServiceRequest,
    SkillHypothesis,
    SkillSelection,
    UtteranceView,
)
from agent.sdk.service import Service
from agent.sdk.streaming import StreamEnd, StreamStart

__all__ = [
    "BotView",
    "DialogView",
    "HumanView",
    "HypothesisView",
    "Selection",
    "Service",
    "ServiceRequest",
    "SkillHypothesis",
    "SkillSelection",
    "StreamEnd",
    "StreamStart",
    "UtteranceView",
]
