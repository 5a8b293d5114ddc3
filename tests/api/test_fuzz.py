"""The OpenAPI schema, fuzzed with schemathesis against the real agent: no input gives 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from agent.api.app import create_app
from agent.settings import Settings
from skills.greeting.app import app as greeting_app
from tests.conftest import service_entry
from tests.support.servers import serving


@pytest.fixture(scope="module")
def agent_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Imported here, not with the module: every pytest worker imports every test module as
    # it collects, and schemathesis (beyond hypothesis, which other modules import) cost
    # each of them half a second of CPU for the one worker that runs this test.
    import schemathesis

    tmp = tmp_path_factory.mktemp("fuzz")
    with serving(greeting_app) as skill:
        pipeline = tmp / "pipeline.json"
        pipeline.write_text(
            json.dumps({"services": {"skills": {"greeting": service_entry(skill.url)}}})
        )
        app = create_app(Settings(db_url=f"sqlite:///{tmp}/fuzz.db", pipeline=Path(pipeline)))
        with serving(app) as agent:
            yield schemathesis.openapi.from_url(f"{agent.url}/openapi.json")


def test_no_input_causes_a_server_error(agent_schema: Any) -> None:
    # Hypothesis strategies per operation, driven here: schemathesis 4's pytest plugin does
    # not run under pytest 9.
    operations = [result.ok() for result in agent_schema.get_all_operations()]
    assert len(operations) >= 8
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def fuzz(case: Any) -> None:
            response = case.call(timeout=30)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} {case.body!r:.200}: "
                    f"{response.status_code} {response.text[:200]}"
                )

        fuzz()
    assert failures == []
