"""Liveness for load balancers and dp-agent clients."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/ping")
async def ping() -> str:
    """``"pong"`` while the agent is up."""
    return "pong"
