"""The stored schema's version, which both stores keep, and why a database is refused.

Version 1 is the schema of Chorus 1.0.0. Each store keeps its version beside a mark that
only 1.0.0 and later write (SQLite's ``application_id``; the ``{_id: "chorus"}`` document
of MongoDB's ``chorus_meta``), so a database written by a build before 1.0.0, which
numbered its schema without that mark, is never taken for a version of the same number.
Such a database is refused rather than upgraded: its data comes over through a backup
(docs/storage.md, "Schema versions").

An upgrade, once there is one, is a step from version N to N + 1; a store runs the steps a
database lacks, in order, when it opens, and records each version it reaches.
"""

from __future__ import annotations

from agent.store.base import StoreUnavailable

#: The schema of the first release, which every database this build creates starts at.
FIRST_VERSION = 1


class SchemaRefused(StoreUnavailable):
    """The database's schema is not one this build reads: written by a build before 1.0.0,
    by a newer Chorus, or (read-only) one that opening would have to upgrade. Nothing is
    written to it; the message says what to do."""


def before_first_release(where: str, version: int) -> SchemaRefused:
    """The error for a database a build before 1.0.0 wrote, ``version`` in its numbering."""
    return SchemaRefused(
        f"{where}: written by a Chorus build before 1.0.0 (schema version {version} of "
        "that numbering), which this build neither reads nor upgrades; nothing was "
        "changed. Export it with the build that wrote it (`chorus export --all -o "
        "backup.jsonl --db ...`), then `chorus import backup.jsonl --db ...` into a new "
        "database with this one (docs/backup.md)"
    )


def newer(where: str, version: int, latest: int) -> SchemaRefused:
    """The error for a database of a schema version newer than this build knows."""
    return SchemaRefused(
        f"{where}: schema version {version}, written by a newer Chorus; this build knows "
        f"versions up to {latest} and changes nothing: run the Chorus that wrote it, or a "
        "newer one"
    )


def behind(where: str, version: int, latest: int) -> SchemaRefused:
    """The error for a read-only opening of a database that would need an upgrade."""
    return SchemaRefused(
        f"{where}: schema version {version}, this build reads {latest}; start the agent "
        "or run `chorus stats` on it once to bring it up to date"
    )
