"""Property-based: arbitrary JSON from clients and services, on both stores.

Whatever the storage bounds accept reads back equal, wherever it is stored (attributes,
annotations, a hypothesis' own fields, a client's extra fields); whatever they refuse is
refused with a message saying where; and the user's next turn works either way.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.sdk.models import check_attribute_keys
from agent.state.models import BotUtterance, HumanUtterance, Hypothesis
from agent.state.storage_limits import StorageLimits, UnstorableValue
from agent.store import Store
from agent.store.base import TurnEnd
from tests.store.reads import opened

LIMITS = StorageLimits(max_depth=12, max_items=400, max_bytes=20_000)

# Every code point, lone surrogates and NUL included: what json.loads can produce.
_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_numbers = st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
_scalars = st.none() | st.booleans() | _numbers | _text
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=40,
)
# Deep values on purpose, beyond the depth bound.
_deep = st.integers(min_value=1, max_value=20).map(lambda n: _nest(n))


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = {f"level{level}": value} if level % 2 else [value]
    return value


def storable(value: Any) -> bool:
    try:
        LIMITS.measure(value, "value")
    except UnstorableValue as exc:
        assert exc.where.startswith("value") and exc.problem, "a refusal says where and why"
        return False
    return True


async def turn(
    store: Store,
    user: str,
    text: str,
    *,
    extra: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
    hypothesis_fields: dict[str, Any] | None = None,
    human_attributes: dict[str, Any] | None = None,
) -> str:
    start = await store.turns.open_turn(user, "http_client", 4)
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(
        text=text, user=human.model_dump(mode="json"), attributes=extra or {}
    )
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    utterance.annotations = annotations or {}
    utterance.hypotheses = [
        Hypothesis(skill_name="echo", text="ok", confidence=0.5, **(hypothesis_fields or {}))
    ]
    bot = BotUtterance(text="ok", orig_text="ok", active_skill="echo", confidence=0.5)
    await store.turns.finish_turn(
        TurnEnd(dialog.dialog_id, human.id, utterance, bot, human_attributes or {}, {})
    )
    return dialog.dialog_id


@pytest.mark.parametrize("slot", ["annotation", "attribute", "hypothesis", "extra"])
@given(value=_json | _deep)
@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
async def test_accepted_json_reads_back_equal_and_refused_json_harms_nothing(
    store: Store,
    slot: str,
    value: Any,
) -> None:
    # A user of its own per example: the same user's dialog grew by two turns an example and
    # was read whole each time (most of the file's time on MongoDB), and what is checked is
    # this value's turn and the turn after it.
    user = f"user-{slot}-{uuid.uuid4().hex}"
    if storable({"k": value}):
        placed = {
            "annotation": {"annotations": {"svc": value}},
            "attribute": {"human_attributes": check_attribute_keys({"k": value})},
            "hypothesis": {"hypothesis_fields": {"mine": value}},
            "extra": {"extra": {"k": value}},
        }[slot]
        dialog_id = await turn(store, user, "store this", **placed)
        dialog = await store.reader.dialog(dialog_id)
        assert dialog is not None
        human_utterance = dialog.utterances[-2]
        assert isinstance(human_utterance, HumanUtterance)
        stored = {
            "annotation": human_utterance.annotations.get("svc"),
            "attribute": dialog.human.attributes.get("k"),
            "hypothesis": (human_utterance.hypotheses[0].model_extra or {}).get("mine"),
            "extra": human_utterance.attributes.get("k"),
        }[slot]
        assert stored == value
    # Either way, the user's next turn works and the whole dialog reads back.
    dialog_id = await turn(store, user, "and then")
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None and dialog.utterances[-1].text == "ok"


@given(keys=st.lists(_text, min_size=1, max_size=8))
@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
async def test_any_accepted_attribute_key_is_stored_as_a_plain_key(
    store: Store,
    keys: list[str],
) -> None:
    updates = {key: index for index, key in enumerate(keys)}
    try:
        check_attribute_keys(updates)
        LIMITS.measure(updates, "attributes")
    except ValueError:
        return  # refused at the boundary: nothing reaches the store
    before = (await opened(store, "bystander")).human.model_dump()
    user = f"keys-{uuid.uuid4().hex}"
    await turn(store, user, "remember", human_attributes=updates)
    assert (await opened(store, user)).human.attributes == updates
    assert (await opened(store, "bystander")).human.model_dump() == before
