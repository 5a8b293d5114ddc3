"""Reading the stored state: one dialog, or all of a user's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status

from agent.api.deps import StoreDep
from agent.api.security import ReaderKey
from agent.state.models import Dialog

router = APIRouter(prefix="/api", tags=["dialogs"], dependencies=[ReaderKey])

DialogId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
UserId = Annotated[str, Path(pattern=r"^[\w.@:+-]{1,128}$")]


@router.get("/dialogs/{dialog_id}", response_model=Dialog)
async def get_dialog(dialog_id: DialogId, store: StoreDep) -> Dialog:
    """The whole dialog state: profiles, every utterance with its annotations and
    hypotheses, errors and trace."""
    dialog = await store.dialog(dialog_id)
    if dialog is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no dialog with id {dialog_id!r}")
    return dialog


@router.delete("/user/{user_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_user(user_id: UserId, store: StoreDep) -> None:
    """Erase the user on request: profile, attributes, every dialog and utterance."""
    if not await store.delete_user(user_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user with id {user_id!r}")


@router.get("/user/{user_id}", response_model=list[Dialog])
async def get_user_dialogs(user_id: UserId, store: StoreDep) -> list[Dialog]:
    """All dialogs of the user with this (client-side) id, oldest first."""
    dialogs = await store.user_dialogs(user_id)
    if dialogs is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user with id {user_id!r}")
    return dialogs
