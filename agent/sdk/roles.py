"""Who a service is in the pipeline: its role.

A role is spelled as the pipeline file names its section (``"skills"``), and a turn goes
through the roles in the order of :data:`ROLES`. A service made with the SDK names its
role in the singular (``"skill"``) on ``GET /health``: :func:`singular`.
"""

from __future__ import annotations

from typing import Literal

Role = Literal[
    "annotators",
    "skill_selectors",
    "skills",
    "candidate_annotators",
    "response_selectors",
    "response_annotators",
]

#: The order a turn goes through the roles; a service waits for every earlier role.
ROLES: tuple[Role, ...] = (
    "annotators",
    "skill_selectors",
    "skills",
    "candidate_annotators",
    "response_selectors",
    "response_annotators",
)


def singular(role: Role) -> str:
    """``"skills"`` -> ``"skill"``: how one service of the role calls itself."""
    return role.removesuffix("s")
