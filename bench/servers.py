"""The databases a benchmark measures, one way for every script: an SQLite file in a
temporary directory, the MongoDB server named by ``--mongodb-url``, or a FerretDB started
for the run (built from tools/ferretdb, see tests/support/mongo_server.py), each in a
database of its own so that runs never see each other's records."""

from __future__ import annotations

import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def mongodb_server(url: str | None, bench: str) -> Iterator[str]:
    """``url`` when given, else a FerretDB started here and stopped afterwards; when
    neither can be had, the run stops with what to install (``bench`` names the script)."""
    if url:
        yield url
        return
    sys.path.insert(0, str(ROOT))
    from tests.support.mongo_server import running_mongodb, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        sys.exit(f"{bench}: {reason} (or pass --sqlite where the script has it)")
    with running_mongodb() as started:
        yield started


@contextmanager
def sqlite_file(name: str) -> Iterator[str]:
    """The URL of an SQLite file in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as tmp:
        yield f"sqlite:///{tmp}/{name}.db"


def new_database(url: str, prefix: str = "chorus_bench") -> str:
    """``url`` naming a database of its own: on a MongoDB server, a new database (options
    such as credentials kept); for SQLite, a new file beside the given one."""
    if url.startswith("sqlite"):
        return url.replace(".db", f"-{uuid.uuid4().hex[:6]}.db")
    head, sep, options = url.partition("?")
    scheme, rest = head.split("://", 1)
    hosts = rest.split("/", 1)[0]
    return f"{scheme}://{hosts}/{prefix}_{uuid.uuid4().hex[:12]}{sep}{options}"
