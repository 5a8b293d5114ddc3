"""Settings: renamed ones (the new name is read, the old one still works for a while and
says what to set instead), and the data lifecycle's retention rules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.settings import SettingsError, load_settings


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


def test_retention_is_off_unless_set_and_each_rule_is_read_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not load_settings().retention().any
    monkeypatch.setenv("CHORUS_CLOSE_IDLE_DIALOGS", "3600")
    retention = load_settings().retention()
    assert retention.idle_dialogs == timedelta(hours=1)
    assert (retention.closed_dialogs, retention.compact_turns) == (None, None)


def test_a_bad_retention_setting_stops_the_agent_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHORUS_RETAIN_CLOSED_DIALOGS", "-5")
    with pytest.raises(SettingsError, match="CHORUS_RETAIN_CLOSED_DIALOGS"):
        load_settings()
    monkeypatch.setenv("CHORUS_RETAIN_CLOSED_DIALOGS", "2592000")
    monkeypatch.setenv("CHORUS_SWEEP_BATCH", "0")
    with pytest.raises(SettingsError, match="CHORUS_SWEEP_BATCH"):
        load_settings()


def test_websockets_may_not_hold_the_whole_connection_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHORUS_MAX_CONNECTIONS", "100")
    monkeypatch.setenv("CHORUS_MAX_WEBSOCKETS", "100")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert str(refused.value) == (
        "bad settings: CHORUS_MAX_WEBSOCKETS: 100 would leave none of the 100 connections "
        "(CHORUS_MAX_CONNECTIONS) to plain HTTP clients; set it lower"
    )
    monkeypatch.setenv("CHORUS_MAX_WEBSOCKETS", "99")
    assert load_settings().max_websockets == 99
