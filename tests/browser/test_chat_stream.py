"""The chat page follows a turn: the services' progress and a streaming skill's tokens
appear while the turn runs, then the stored answer replaces them.

The skill streams two pieces and then waits for the test to let it finish: what the page
shows in between can only have come from the streamed events (no sleeps, no timing)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from annotators.tokens.app import app as tokens_app
from skills.fallback.app import app as fallback_app
from tests.browser.test_pages import url
from tests.conftest import AgentFactory, service_entry
from tests.support.services import choosing_skill_selector, gated_story

if TYPE_CHECKING:
    from playwright.sync_api import Page

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    yield opened
    opened.set()  # never leave the skill waiting


def test_the_chat_shows_progress_and_tokens_as_they_arrive(
    page: Page, services: Any, agent: AgentFactory, gate: threading.Event
) -> None:
    client = agent(
        {
            "services": {
                "annotators": {"tokens": service_entry(services(tokens_app).url)},
                "skill_selectors": {
                    "picker": service_entry(services(choosing_skill_selector("story")).url)
                },
                "skills": {
                    "story": service_entry(services(gated_story(gate)).url, 30.0, stream=True),
                    "fallback": service_entry(services(fallback_app).url),
                },
            },
            "turn_timeout": 30.0,
        }
    )
    page.goto(url(client, "/chat"))
    page.get_by_label("Message").fill("Tell me a story")
    page.get_by_role("button", name="Send").click()

    live = page.locator(".message.live")
    expect(live.locator(".text")).to_have_text("Once upon ")
    expect(live.locator(".progress")).to_contain_text("tokens")
    expect(live.locator(".progress")).to_contain_text("picker")
    expect(page.locator(".message.bot")).to_have_count(0)  # the turn has not ended

    gate.set()
    answer = page.locator(".message.bot")
    expect(answer.locator(".text")).to_have_text("Once upon a time.")
    expect(answer.locator(".skill")).to_have_text("story")
    expect(live).to_have_count(0)
