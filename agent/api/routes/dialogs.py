"""Reading the stored state: one dialog, all of a user's, or a page of dialog ids.

Each dialog read answers in one of two dialects (the query parameter ``?view=``, its wire
name, else ``CHORUS_DIALECT``, else the pipeline file's dialect): Chorus's typed state
(:class:`agent.state.models.Dialog`, ISO dates), or dp-agent's
(:mod:`agent.api.dp_agent_dialog`), which its clients and Dream's tools parse.
``GET /api/dialogs/`` is dp-agent's alone: Chorus had no list before.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Path, Query, status
from pydantic import BaseModel, Field

from agent.api.deps import ErasureDep, ExperimentDep, PipelineDep, ReaderDep, SettingsDep
from agent.api.dp_agent_dialog import dp_agent_dialog
from agent.api.request_limits import check_user_id
from agent.api.schemas import USER_ID_CAP
from agent.api.security import ReaderKey
from agent.state.dp_agent import dialog_id_prefix, is_object_id, object_id
from agent.state.models import Dialog
from agent.store.base import DialogReader
from agent.turn.arms import Experiment
from agent.turn.base import LoadedPipeline
from agent.turn.config import Dialect

router = APIRouter(prefix="/api", tags=["dialogs"], dependencies=[ReaderKey])

#: Chorus's dialog id, or dp-agent's 24-hex ``_id`` of it.
DialogId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
#: Any printable user id; ``:path`` in the routes lets it hold ``/`` (sent as ``%2F``).
UserId = Annotated[str, Path(min_length=1, max_length=USER_ID_CAP)]
#: The dialect a read answers in; ``view`` is the query parameter's name on the wire.
DialectParam = Annotated[
    Dialect | None,
    Query(
        alias="view",
        description="chorus: Chorus's typed state; dp-agent: as dp-agent answers "
        "(default: CHORUS_DIALECT, else dp-agent on a dp-agent pipeline file)",
    ),
]
#: The most ids one page of ``GET /api/dialogs/`` holds; a larger ``limit`` is served in
#: pages of this size (``next`` says where the following one starts).
PAGE_CAP = 1000
#: The largest ``offset`` (both stores take 64-bit integers; no database holds more dialogs).
MAX_OFFSET = 2**62


class DialogIdPage(BaseModel):
    """dp-agent's answer to ``GET /api/dialogs/``."""

    dialog_ids: list[str] = Field(description="in the order the dialogs were opened")
    next: str | None = Field(
        description="the query of the next page (``?offset=...&limit=...``), or null on the last"
    )


def _pipeline_names(
    dialog: Dialog, pipeline: LoadedPipeline, experiment: Experiment | None
) -> list[str]:
    """What dp-agent lists as the dialog's ``attributes.pipeline`` for the pipeline that
    answers it: its arm's, with an experiment (the first arm's for a dialog without a
    configured arm)."""
    arm = experiment.arm(dialog.arm) if experiment else None
    return (arm.pipeline if arm else pipeline).listed_names()


async def resolve_dialog_id(store: DialogReader, dialog_id: str) -> str | None:
    """Chorus's id of a dialog named by it or by the 24-hex ``_id`` dp-agent shows for it
    (None: no dialog has that ``_id``)."""
    if not is_object_id(dialog_id):
        return dialog_id
    wanted = dialog_id.lower()
    starts = await store.dialog_starts(dialog_id_prefix(wanted))
    found = next((i for i, start in starts.items() if object_id(i, start) == wanted), None)
    # a dialog imported from dp-agent answers to the _id dp-agent gave it too
    return found or await store.dialog_by_dp_agent_id(wanted)


async def find_dialog(store: DialogReader, dialog_id: str) -> Dialog | None:
    """A dialog by Chorus's id or by the 24-hex ``_id`` dp-agent shows for it."""
    resolved = await resolve_dialog_id(store, dialog_id)
    return None if resolved is None else await store.dialog(resolved)


@router.get("/dialogs/", response_model=DialogIdPage)
async def list_dialogs(
    store: ReaderDep,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, description=f"at most {PAGE_CAP} are served")] = 100,
    active: Annotated[
        str | None,
        Query(
            alias="_active",
            pattern="^(0|1|True|False|true|false)$",
            description="1: open dialogs only; 0: closed ones only",
        ),
    ] = None,
) -> DialogIdPage:
    """Dialog ids, a page at a time, as dp-agent (and Dream's ``utils/dumper``) reads them."""
    limit = min(limit, PAGE_CAP)
    only = None if active is None else active in ("1", "True", "true")
    ids = await store.list_dialog_ids(offset, limit, only)
    if len(ids) < limit:
        return DialogIdPage(dialog_ids=ids, next=None)
    query: dict[str, Any] = {"offset": offset + limit, "limit": limit}
    if only is not None:
        query["_active"] = int(only)
    return DialogIdPage(dialog_ids=ids, next="?" + urlencode(query))


@router.get("/dialogs/{dialog_id}", response_model=Dialog | dict[str, Any])
async def get_dialog(
    dialog_id: DialogId,
    store: ReaderDep,
    settings: SettingsDep,
    pipeline: PipelineDep,
    experiment: ExperimentDep,
    dialect: DialectParam = None,
) -> Dialog | dict[str, Any]:
    """The whole dialog state: profiles, every utterance with its annotations and
    hypotheses (and, in Chorus's dialect, errors and trace). The id may be dp-agent's
    24-hex ``_id``."""
    dialog = await find_dialog(store, dialog_id)
    if dialog is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no dialog with id {dialog_id!r}")
    if (dialect or settings.dialect or pipeline.dialect) == "dp-agent":
        return dp_agent_dialog(dialog, _pipeline_names(dialog, pipeline, experiment))
    return dialog


@router.delete("/user/{user_id:path}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_user(user_id: UserId, store: ErasureDep, settings: SettingsDep) -> None:
    """Erase the user on request: profile, attributes, every dialog and utterance."""
    check_user_id(user_id, settings.limits.max_user_id_length)
    if not await store.delete_user(user_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user with id {user_id!r}")


@router.get("/user/{user_id:path}", response_model=list[Dialog] | list[dict[str, Any]])
async def get_user_dialogs(
    user_id: UserId,
    store: ReaderDep,
    settings: SettingsDep,
    pipeline: PipelineDep,
    experiment: ExperimentDep,
    dialect: DialectParam = None,
) -> list[Dialog] | list[dict[str, Any]]:
    """All dialogs of the user with this (client-side) id, oldest first. An unknown user
    is a 404 in Chorus's dialect and no dialogs (``[]``) in dp-agent's, as dp-agent answers."""
    check_user_id(user_id, settings.limits.max_user_id_length)
    dp_agent = (dialect or settings.dialect or pipeline.dialect) == "dp-agent"
    dialogs = await store.user_dialogs(user_id)
    if dialogs is None:
        if dp_agent:
            return []
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no user with id {user_id!r}")
    if dp_agent:
        return [
            dp_agent_dialog(dialog, _pipeline_names(dialog, pipeline, experiment))
            for dialog in dialogs
        ]
    return dialogs
