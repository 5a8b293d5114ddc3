"""Every dialog a store holds, read in one go once the agents that wrote it have stopped.

A test that checks hundreds of stored turns reads them this way rather than one
``GET /api/user/...`` per user: on the FerretDB the tests build, a read of one dialog's
utterances scans every utterance (MongoDB answers it from an index), so a few hundred such
reads took most of a minute of a test that is not about reading.
"""

from __future__ import annotations

import asyncio

from agent.state.models import Dialog
from agent.store import open_store

#: Dialog ids read per page.
PAGE = 500


async def _all_dialogs(db_url: str) -> list[Dialog]:
    store = await open_store(db_url)
    try:
        ids: list[str] = []
        while page := await store.reader.list_dialog_ids(len(ids), PAGE, None):
            ids += page
        return await store.reader.dialogs(ids)
    finally:
        await store.close()


def stored_dialogs(db_url: str) -> list[Dialog]:
    """Every stored dialog, in the order they were opened (from a synchronous test)."""
    return asyncio.run(_all_dialogs(db_url))
