"""The web pages: ``/chat``, ``/inspect/{dialog_id}``, ``/pipeline`` and ``/inbox``.

Plain HTML, CSS and JavaScript files shipped in the package (``agent/api/pages/``): no
build step, no CDN, so they work offline and on a machine that reaches nothing else. The
pages are static and hold no data; their scripts read the JSON API with the API key the
user types in (kept in the tab's sessionStorage), so access control stays where it is,
on ``/api/...``.

Every page is sent with a Content-Security-Policy that allows only the agent's own
scripts and styles: the scripts insert service and user text as text, and the policy
makes sure that even a slip there could not run a script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

PAGES_DIR = Path(__file__).resolve().parent.parent / "pages"

#: Where the pages' scripts and styles are served from (see :func:`static_files`).
ASSETS_PATH = "/pages"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)

DialogId = Annotated[str, PathParam(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


def _page(name: str) -> FileResponse:
    return FileResponse(
        PAGES_DIR / f"{name}.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


def static_files() -> StaticFiles:
    """The pages' scripts and styles, mounted at :data:`ASSETS_PATH`."""
    return StaticFiles(directory=PAGES_DIR)


@router.get("/", response_class=RedirectResponse)
async def home() -> RedirectResponse:
    """A browser pointed at the agent lands on the chat (``POST /`` stays the chat API)."""
    return RedirectResponse("/chat")


@router.get("/chat", response_class=FileResponse)
async def chat_page() -> FileResponse:
    """Talk to the bot: each answer with the skill that gave it."""
    return _page("chat")


@router.get("/inspect", response_class=FileResponse)
async def inspect_form() -> FileResponse:
    """The inspector without a dialog: it asks for an id."""
    return _page("inspect")


@router.get("/inspect/{dialog_id}", response_class=FileResponse)
async def inspect_page(dialog_id: DialogId) -> FileResponse:
    """One dialog turn by turn: annotations, hypotheses, the choice and its reason, the
    attributes and a timeline of the services. The script reads the id from the address
    and the dialog from ``/api/dialogs/{id}``; a malformed id is refused here already."""
    return _page("inspect")


@router.get("/pipeline", response_class=FileResponse)
async def pipeline_page() -> FileResponse:
    """The service graph and its live numbers (the script polls ``/api/pipeline``)."""
    return _page("pipeline")


@router.get("/inbox", response_class=FileResponse)
async def inbox_page() -> FileResponse:
    """The operators' inbox: the dialogs handed to people, claimed, answered and handed
    back through ``/api/operator/...`` with the operator key the page asks for."""
    return _page("inbox")
