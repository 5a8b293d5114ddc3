"""Dialog views as the agent sends them: the SDK's own builder, which authors use too."""

from agent.sdk.testing import hypothesis, view

__all__ = ["hypothesis", "view"]
