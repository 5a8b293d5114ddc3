"""Settings: the variables read (and those no longer read, which stop the agent saying what
to do instead), and the nested domain types they fill, such as the retention rules."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from agent.cli.telegram_settings import ALL_VARIABLES, TELEGRAM_VARIABLES
from agent.cli.telegram_settings import REMOVED as TELEGRAM_REMOVED
from agent.settings import REMOVED, VARIABLES, SettingsError, load_settings
from agent.state.storage_limits import StorageLimits
from agent.store.base import Retention


def test_the_queue_lease_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_QUEUE_LEASE", "3")
    assert load_settings().queue_lease == 3.0


def test_a_short_arm_key_stops_the_agent_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short key could be found by trying every key: then every user's arm with it."""
    monkeypatch.setenv("CHORUS_ARM_KEY", "short")
    with pytest.raises(SettingsError, match="CHORUS_ARM_KEY: must be at least 16 characters"):
        load_settings()
    monkeypatch.setenv("CHORUS_ARM_KEY", "k" * 16)
    assert load_settings().arm_key_bytes() == b"k" * 16


def test_a_removed_variable_stops_the_agent_naming_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable that is no longer read is not ignored without a word: the agent says it
    is gone and what replaces it (a renamed one, or the constant it became)."""
    for old in ("TURN_LEASE", "LINE_LEASE"):  # the queue's lease, under its older names
        monkeypatch.setenv(f"CHORUS_{old}", "4")
        with pytest.raises(
            SettingsError, match=f"CHORUS_{old} is no longer read: set CHORUS_QUEUE_LEASE"
        ):
            load_settings()
        monkeypatch.delenv(f"CHORUS_{old}")
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


def test_the_nested_types_take_no_variable_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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


@pytest.mark.parametrize(
    ("variable", "instead"),
    [
        ("CHORUS_MAX_USER_ID_LENGTH", "a constant now (MAX_USER_ID_LENGTH in agent/state/"),
        ("CHORUS_WEBSOCKET_IDLE_TIMEOUT", "a constant now (WEBSOCKET_IDLE_TIMEOUT in agent/api/"),
        ("CHORUS_MAX_WEBSOCKETS", "WebSockets may hold half of CHORUS_MAX_CONNECTIONS"),
        ("CHORUS_DIALOG_VIEW", "set CHORUS_DIALECT instead"),
        ("CHORUS_COMMAND_REPLY", "set CHORUS_DIALECT instead"),
    ],
)
def test_a_setting_made_a_constant_or_merged_stops_the_agent_naming_its_replacement(
    monkeypatch: pytest.MonkeyPatch, variable: str, instead: str
) -> None:
    monkeypatch.setenv(variable, "dp-agent")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert f"{variable} is no longer read: {instead}" in str(refused.value)


def test_one_variable_chooses_the_dialect_of_replies_and_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().dialect is None  # the pipeline file's
    monkeypatch.setenv("CHORUS_DIALECT", "dp-agent")
    assert load_settings().dialect == "dp-agent"
    monkeypatch.setenv("CHORUS_DIALECT", "parlai")
    with pytest.raises(SettingsError, match="CHORUS_DIALECT: Input should be 'chorus' or"):
        load_settings()


DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def documented(heading: str) -> list[str]:
    """The variables in the first column of the first table under ``heading`` in
    docs/configuration.md (a row may name several, comma-separated)."""
    lines = DOCS.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    names: list[str] = []
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            in_table = True
            first = line.split("|")[1]
            names += re.findall(r"`(CHORUS_[A-Z_]+)`", first)
        elif in_table or line.startswith("#"):
            break
    return names


def test_the_documented_tables_list_exactly_the_variables_read_at_most_28() -> None:
    """docs/configuration.md's tables are the settings there are: the agent's, the bot's,
    and the variables that are no longer read (each of which stops its program)."""
    agent = documented("## Settings")
    telegram = documented("### `chorus telegram`")
    assert (sorted(agent), sorted(telegram)) == (VARIABLES, TELEGRAM_VARIABLES)
    assert len(ALL_VARIABLES) == len(agent) + len(telegram) <= 28
    removed = [f"CHORUS_{name}" for name in REMOVED] + [
        f"CHORUS_TELEGRAM_{name}" for name in TELEGRAM_REMOVED
    ]
    assert sorted(documented("### Constants, not settings")) == sorted(removed)
    assert not set(removed) & set(ALL_VARIABLES)
