"""Backup and import: the dialogue state as JSON Lines (``chorus export``, ``chorus import``)
and dp-agent's database read as a backup (docs/backup.md).

A layer of its own above the store (tests/test_layers.py): an export reads through
:class:`~agent.store.reader.DialogReader`, an import checks through it and writes through
:class:`~agent.store.base.RestoreStore`, so either store serves. :mod:`.files` holds the
format, the export and the restore, :mod:`.checks` what an import checks before it writes,
and :mod:`.dp_agent` the reading of dp-agent's collections.
"""
