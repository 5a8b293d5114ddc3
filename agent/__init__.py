"""Chorus: a stateless dialogue-state orchestration agent in the style of DeepPavlov Dream.

Importing this package does nothing else: the server lives in :mod:`agent.api`, the
service SDK in :mod:`agent.sdk` (which services import without the agent's server; it is
a distribution of its own, ``chorus-sdk``, of this version: sdk/pyproject.toml).
"""

__version__ = "1.0.0"
