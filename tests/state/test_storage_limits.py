"""The storage bounds, measured on their own: each refusal names where and which bound."""

from __future__ import annotations

from typing import Any

import pytest

from agent.state.storage_limits import StorageLimits, UnstorableValue

LIMITS = StorageLimits(max_depth=3, max_items=10, max_bytes=200)


@pytest.mark.parametrize(
    ("value", "where", "problem"),
    [
        ({"a": {"b": {"c": {"d": 1}}}}, "v['a']['b']['c']", "MAX_JSON_DEPTH"),
        ([[[[1]]]], "v[0][0][0]", "MAX_JSON_DEPTH"),
        (list(range(11)), "v", "MAX_JSON_ITEMS"),
        ({"x": float("nan")}, "v['x']", "NaN and Infinity"),
        ([1, float("-inf")], "v[1]", "NaN and Infinity"),
        ({"n": 2**63}, "v['n']", "64-bit"),
        ({"s": "ok\ud800"}, "v['s']", "surrogate"),
        ({"\udfff": 1}, "v['\\udfff']", "surrogate"),
        ({"b": b"bytes"}, "v['b']", "bytes is not JSON"),
        ("x" * 300, "v", "MAX_VALUE_BYTES"),
    ],
)
def test_an_unstorable_value_is_refused_naming_where_and_why(
    value: Any,
    where: str,
    problem: str,
) -> None:
    with pytest.raises(UnstorableValue) as refused:
        LIMITS.measure(value, "v")
    assert refused.value.where == where and problem in refused.value.problem


def test_a_value_within_the_bounds_is_measured_as_its_json_size() -> None:
    value = {"name": "Ann", "scores": [1, 2.5, None, True], "é": "ü"}
    size = LIMITS.measure(value, "v")
    assert 40 <= size <= 200
    assert LIMITS.measure(2**63 - 1) > 0 and LIMITS.measure(-(2**63)) > 0


def test_a_long_hostile_key_is_shortened_in_the_message() -> None:
    with pytest.raises(UnstorableValue) as refused:
        LIMITS.measure({"k" * 1000: float("nan")}, "v")
    assert len(str(refused.value)) < 200
