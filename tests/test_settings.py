"""Settings: the variables read (and those no longer read, which stop the agent saying what
to do instead), and the nested domain types they fill, such as the retention rules."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from agent.settings import VARIABLES, SettingsError, load_settings
from agent.state.limits import StorageLimits
from agent.store.base import Retention


def test_the_line_lease_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_LINE_LEASE", "3")
    assert load_settings().line_lease == 3.0


def test_a_removed_variable_stops_the_agent_naming_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable that is no longer read is not ignored without a word: the agent says it
    is gone and what replaces it (a renamed one, or the constant it became)."""
    monkeypatch.setenv("CHORUS_TURN_LEASE", "4")
    with pytest.raises(
        SettingsError, match="CHORUS_TURN_LEASE is no longer read: set CHORUS_LINE_LEASE"
    ):
        load_settings()
    monkeypatch.delenv("CHORUS_TURN_LEASE")
    monkeypatch.setenv("CHORUS_MAX_JSON_DEPTH", "8")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "CHORUS_MAX_JSON_DEPTH is no longer read: a constant now (MAX_JSON_DEPTH" in str(
        refused.value
    )


def test_a_removed_variable_in_the_env_file_stops_the_agent_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("CHORUS_SWEEP_BATCH=10\n")
    with pytest.raises(SettingsError, match="CHORUS_SWEEP_BATCH is no longer read"):
        load_settings()


def test_a_retention_rule_is_read_from_the_env_file_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("CHORUS_CLOSE_IDLE_DIALOGS=60\nCHORUS_COMPACT_TURNS_AFTER=7\n")
    monkeypatch.setenv("CHORUS_CLOSE_IDLE_DIALOGS", "120")
    retention = load_settings().retention
    assert retention.idle_dialogs == timedelta(minutes=2)
    assert retention.compact_turns == timedelta(seconds=7)


def test_at_most_26_variables_are_read_and_the_nested_types_take_none_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert len(VARIABLES) <= 26
    assert "CHORUS_LIMITS" not in VARIABLES and "CHORUS_RETENTION" not in VARIABLES
    monkeypatch.setenv("CHORUS_LIMITS", '{"max_depth": 3}')
    monkeypatch.setenv("CHORUS_RETENTION", '{"closed_dialogs": 60}')
    settings = load_settings()
    assert settings.limits == StorageLimits() and not settings.retention.any


def test_retention_is_off_unless_set_and_each_rule_is_read_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().retention == Retention()
    monkeypatch.setenv("CHORUS_CLOSE_IDLE_DIALOGS", "3600")
    retention = load_settings().retention
    assert retention.idle_dialogs == timedelta(hours=1)
    assert (retention.closed_dialogs, retention.compact_turns) == (None, None)


def test_a_bad_retention_setting_stops_the_agent_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHORUS_RETAIN_CLOSED_DIALOGS", "-5")
    with pytest.raises(SettingsError, match="CHORUS_RETAIN_CLOSED_DIALOGS"):
        load_settings()
    monkeypatch.setenv("CHORUS_RETAIN_CLOSED_DIALOGS", "2592000")
    monkeypatch.setenv("CHORUS_COMPACT_TURNS_AFTER", "soon")
    with pytest.raises(SettingsError, match="CHORUS_COMPACT_TURNS_AFTER: Input should be"):
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
