"""Settings renamed to the glossary's words: the new name is read, the old one still works
for a while and says what to set instead."""

from __future__ import annotations

import pytest

from agent.settings import load_settings


def test_the_line_lease_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_LINE_LEASE", "3")
    assert load_settings().line_lease == 3.0


def test_the_old_turn_lease_still_works_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_TURN_LEASE", "4")
    with pytest.warns(DeprecationWarning, match="set CHORUS_LINE_LEASE instead"):
        settings = load_settings()
    assert settings.line_lease == 4.0


def test_the_new_name_wins_over_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_TURN_LEASE", "4")
    monkeypatch.setenv("CHORUS_LINE_LEASE", "2")
    with pytest.warns(DeprecationWarning):
        assert load_settings().line_lease == 2.0


def test_a_bad_old_value_is_named_like_any_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_TURN_LEASE", "0")
    with pytest.raises(ValueError, match="CHORUS_TURN_LEASE"):
        load_settings()
