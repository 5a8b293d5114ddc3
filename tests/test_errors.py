"""One error tree: every exception class under ``agent/`` derives from ``ChorusError``, and
every public one is drawn in :mod:`agent.sdk.errors`, so the map a newcomer reads is whole."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import agent
from agent.sdk import errors
from agent.sdk.errors import ChorusError, ConfigError


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for module_info in pkgutil.walk_packages(agent.__path__, "agent."):
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found.append(value)
    return found


CLASSES = _exception_classes()


def _qualified(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def test_the_walk_finds_the_errors_of_every_layer() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {
        "ServiceTimeout",
        "RefusedOutput",
        "SettingsError",
        "UnstorableValue",
        "BodyTooLarge",
        "ScaffoldError",
    } <= names


@pytest.mark.parametrize("cls", CLASSES, ids=_qualified)
def test_every_error_derives_from_chorus_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, ChorusError)


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if not c.__name__.startswith("_")], ids=_qualified
)
def test_every_public_error_is_drawn_in_the_map(cls: type[BaseException]) -> None:
    assert errors.__doc__ is not None
    name = cls.__name__
    assert re.search(rf"[─ ]{name}\b", errors.__doc__), f"draw {name} in agent/sdk/errors.py"


def test_errors_that_callers_catch_as_value_errors_still_are() -> None:
    from agent.settings import SettingsError
    from agent.state.storage_limits import UnstorableValue
    from agent.turn.config import PipelineConfigError

    for cls in (PipelineConfigError, SettingsError, UnstorableValue):
        assert issubclass(cls, ValueError)
    assert issubclass(SettingsError, ConfigError)
