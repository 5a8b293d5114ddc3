"""The dialogue state of DeepPavlov Dream, as pydantic models."""

from agent.state.models import (
    Bot,
    BotUtterance,
    Dialog,
    Human,
    HumanUtterance,
    Hypothesis,
    Profile,
    ServiceCall,
    ServiceFailure,
    Utterance,
)

__all__ = [
    "Bot",
    "BotUtterance",
    "Dialog",
    "Human",
    "HumanUtterance",
    "Hypothesis",
    "Profile",
    "ServiceCall",
    "ServiceFailure",
    "Utterance",
]
