"""Where ``chorus run`` serves the agent, so that ``chorus chat`` in the same checkout finds it
without ``--url`` when ``make run RUN_ARGS="--port 5000"`` moved it.

``chorus run`` writes ``data/chorus-run.json`` (beside the default SQLite store, which git
ignores) as it starts the agent, and removes it when it stops; the file names the process,
so one left behind by a run that was killed is not believed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

ADDRESS_FILE = Path("data") / "chorus-run.json"
DEFAULT_URL = "http://127.0.0.1:4242"
#: Addresses that listen everywhere: a client on this machine reaches them on loopback.
_EVERYWHERE = frozenset({"0.0.0.0", "::", ""})


class RunAddress(BaseModel):
    """The agent ``chorus run`` serves, and the process serving it."""

    url: str
    pid: int = Field(gt=0)


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for an agent listening on ``host:port``."""
    shown = "127.0.0.1" if host in _EVERYWHERE else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def record(root: Path, host: str, port: int) -> None:
    """Say where this process serves the agent (best effort: a read-only checkout only
    loses ``chorus chat``'s default). A run of the same folder that is still going keeps
    its record: the stack you started first (``make run``) stays the one ``chorus chat``
    finds while another comes and goes (a test suite's ``chorus run`` in the checkout)."""
    path = root / ADDRESS_FILE
    if recorded(root) is not None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        address = RunAddress(url=client_url(host, port), pid=os.getpid())
        path.write_text(address.model_dump_json() + "\n", encoding="utf-8")


def forget(root: Path) -> None:
    """Remove the record, if it is still this process's (another run may have replaced it)."""
    path = root / ADDRESS_FILE
    with contextlib.suppress(OSError, ValidationError):
        if RunAddress.model_validate_json(path.read_text(encoding="utf-8")).pid == os.getpid():
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def recorded(root: Path) -> str | None:
    """The URL of the agent a running ``chorus run`` of ``root`` serves, if there is one."""
    try:
        address = RunAddress.model_validate_json((root / ADDRESS_FILE).read_text("utf-8"))
    except (OSError, ValidationError):
        return None
    return address.url if _alive(address.pid) else None


def agent_url(root: Path, given: str | None) -> str:
    """Where ``chorus chat`` talks: ``--url``, else the agent ``chorus run`` serves from this
    checkout, else the default port."""
    return given or recorded(root) or DEFAULT_URL
