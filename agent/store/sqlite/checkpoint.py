"""The write-ahead log's checkpoints, off the event loop.

In WAL mode SQLite copies the log back into the database file once it holds about 1,000
pages, by default inside the ``COMMIT`` that crosses that size: on the agent's connection,
which runs on the event loop (see :mod:`agent.store.sqlite`), that is several milliseconds
of copying (and an ``fsync``) during which no turn of the agent runs, landing in whichever
turn's or sweep's commit is unlucky. So the agent's connection does no automatic
checkpoint, and :class:`Checkpointer` runs a ``PASSIVE`` one from a thread of its own, on a
connection of its own, every :data:`CHECKPOINT_EVERY` seconds: ``PASSIVE`` never waits for
a lock nor makes a writer wait, and the sqlite3 module lets go of the GIL while SQLite
works. Between two checkpoints the log grows by what the agent wrote meanwhile, then is
written over from its start again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger("chorus.store")

#: Seconds between two checkpoints.
CHECKPOINT_EVERY = 0.5


class Checkpointer:
    """A thread checkpointing the database at ``path`` until :meth:`stop`."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"chorus-checkpoint-{path.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stopped.wait(CHECKPOINT_EVERY):
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # the next one tries again
                    log.warning("SQLite checkpoint failed: %s", exc)
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # what is left
        except sqlite3.Error as exc:
            log.warning("SQLite checkpoint failed: %s", exc)
        finally:
            db.close()

    def stop(self) -> None:
        """Checkpoint once more and end the thread (the caller's connection may then
        close, and its own close checkpoints whatever came after)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
