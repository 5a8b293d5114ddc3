"""A person takes over in the pages (docs/handoff.md), in a real headless browser against
the real agent: the /chat page shows the operator's words as they are written and the bot's
again after the handback, and the inspector marks the turns a person answered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.api.test_handoff import ANNOUNCE, OPERATOR_KEY, operator, pipeline
from tests.browser.test_pages import send, url
from tests.conftest import AgentFactory

if TYPE_CHECKING:
    from playwright.sync_api import Page

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]


def test_the_chat_page_shows_the_operator_and_the_inspector_marks_the_turns(
    page: Page, services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY)
    page.goto(url(client, "/chat"))
    asked = send(page, "I want to talk to a human")
    expect(asked.locator(".text")).to_have_text(ANNOUNCE)
    (waiting,) = client.get("/api/operator/dialogs", headers=operator(client)).json()["dialogs"]
    dialog_id = waiting["handoff"]["dialog_id"]
    client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client))
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(client),
        json={"text": "Hi, Ann here."},
    )
    answers = page.locator(".message.bot")
    expect(answers).to_have_count(2)
    expect(answers.last.locator(".text")).to_have_text("Hi, Ann here.")
    expect(answers.last.locator(".skill")).to_have_text("operator ann")

    client.post(f"/api/operator/dialogs/{dialog_id}/handback", headers=operator(client))
    back = send(page, "Hello!")
    expect(back.locator(".skill")).to_have_text("greeting")

    page.goto(url(client, f"/inspect/{dialog_id}"))
    marked = page.locator(".turn.handed-off")
    expect(marked).to_have_count(1)
    expect(marked.locator(".utterance.operator .who")).to_have_text("Operator ann")
    expect(marked.locator(".handoff-note")).to_contain_text("answered by operator ann")
