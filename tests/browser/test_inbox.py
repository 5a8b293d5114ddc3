"""The operator inbox (/inbox) and the /chat page through a handoff and back, in two real
browser tabs against the real agent and real services: a user asks for a person on /chat;
an operator signs in to the inbox with the operator key (the API key is refused), claims the
dialog, reads it and the inspector's view of its turns, and answers; the /chat page shows
the answer; the user's next message appears live in the inbox and the bot does not answer
it; the operator hands the dialog back and the bot answers again.

Playwright's ``expect`` waits for each page to get there: no sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from skills.handoff.app import app as handoff_app
from tests.browser.conftest import pipeline
from tests.browser.test_pages import send, url
from tests.conftest import AgentFactory, service_entry

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]

OPERATOR_KEY = "operator-key-for-tests-0123"
API_KEY = "api-key-for-tests-0123456"
ANNOUNCE = "A person will take over here in a moment."
ASK = "I want to talk to a human"


def handoff_pipeline(services: Any) -> dict[str, Any]:
    """The pages' pipeline with the shipped handoff skill and handoffs on."""
    config = pipeline(services)
    config["services"]["skills"]["handoff"] = service_entry(services(handoff_app).url)
    config["handoff"] = {"announce": ANNOUNCE}
    return config


@pytest.fixture
def handoff_stack(services: Any, agent: AgentFactory) -> httpx.Client:
    """The agent with handoffs, an operator key and an API key (the chat stays open)."""
    return agent(handoff_pipeline(services), operator_key=OPERATOR_KEY, api_key=API_KEY)


@pytest.fixture
def operator_page(browser: Browser) -> Iterator[Page]:
    """A second tab in its own context (its own storage), as an operator's own browser."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    try:
        yield tab
    finally:
        context.close()
    assert not problems, problems


def sign_in(page: Page, name: str, key: str) -> None:
    page.get_by_label("Your name").fill(name)
    page.get_by_label("Operator key").fill(key)
    page.get_by_role("button", name="Open the inbox").click()


def ask_for_a_person(page: Page, client: httpx.Client) -> None:
    """On /chat: a greeting, then the user asks for a person and is told one is coming."""
    page.goto(url(client, "/chat"))
    send(page, "Hello!")
    told = send(page, ASK)
    expect(told.locator(".text")).to_have_text(ANNOUNCE)
    expect(page.locator(".message.system")).to_have_text(["Waiting for a person to join…"])


def test_an_operator_claims_answers_and_hands_back_from_the_inbox(
    page: Page, operator_page: Page, handoff_stack: httpx.Client
) -> None:
    client = handoff_stack
    ask_for_a_person(page, client)

    inbox = operator_page
    inbox.goto(url(client, "/inbox"))
    sign_in(inbox, "ann", API_KEY)  # the chat API key does not open the inbox
    expect(inbox.locator("#sign-in-message")).to_contain_text("The agent refused the key")
    expect(inbox.locator("#desk")).to_be_hidden()
    sign_in(inbox, "ann", OPERATOR_KEY)

    waiting = inbox.locator("#waiting .queue-entry")
    expect(waiting).to_have_count(1)
    expect(waiting.locator(".entry-text")).to_have_text(ASK)
    expect(waiting.locator(".entry-age")).to_contain_text("waiting for")
    expect(inbox.locator("#held .queue-entry")).to_have_count(0)
    waiting.click()

    history = inbox.locator("#history")
    expect(history.locator(".message.human .text")).to_have_text(["Hello!", ASK])
    expect(history.locator(".message.bot .text").last).to_have_text(ANNOUNCE)
    expect(inbox.locator("#dialog-state")).to_contain_text("Waiting for a person")
    expect(inbox.locator("#reply-form")).to_be_hidden()  # claim first

    # The inspector's view of each turn: the greeting's hypotheses, the chosen one marked.
    inbox.locator("#inspector > summary").click()
    first = inbox.locator('#turns .turn[data-turn="1"]')
    expect(first.locator(".hypothesis.chosen")).to_have_attribute("data-skill", "greeting")
    expect(inbox.locator("#turns .turn")).to_have_count(2)

    inbox.get_by_role("button", name="Claim").click()
    expect(inbox.locator("#dialog-state")).to_contain_text("You hold this dialog")
    held = inbox.locator("#held .queue-entry")
    expect(held).to_have_count(1)
    expect(held.locator(".entry-age")).to_contain_text("held by ann for")
    expect(waiting).to_have_count(0)

    inbox.get_by_label("Reply").fill("Hi, I'm Ann. How can I help?")
    inbox.get_by_role("button", name="Send").click()
    expect(history.locator(".message.by-operator .text")).to_have_text(
        ["Hi, I'm Ann. How can I help?"]
    )

    # The user's page: the person joined, and their answer, marked as theirs.
    expect(page.locator(".message.system").last).to_have_text("ann joined the conversation.")
    answer = page.locator(".message.by-operator")
    expect(answer.locator(".text")).to_have_text("Hi, I'm Ann. How can I help?")
    expect(answer.locator(".skill")).to_have_text("operator ann")

    # The user's next message: live in the inbox, and the bot does not answer it.
    answers_before = page.locator(".message.bot").count()
    page.get_by_label("Message").fill("Are you a bot?")
    page.get_by_role("button", name="Send").click()
    expect(history.locator(".message.human .text").last).to_have_text("Are you a bot?")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()  # its reply came back
    expect(page.locator(".message.bot")).to_have_count(answers_before)
    expect(inbox.locator("#turns .turn")).to_have_count(4)  # the inspector's view follows

    inbox.get_by_role("button", name="Hand back to the bot").click()
    expect(inbox.locator("#dialog-state")).to_have_text("Back with the bot (handed back by ann).")
    expect(inbox.locator("#reply-form")).to_be_hidden()
    expect(held).to_have_count(0)
    expect(page.locator(".message.system").last).to_have_text("The bot is back.")

    # The bot answers again, and the operator's reply stays in the dialog's history.
    again = send(page, "Hello!")
    expect(again.locator(".skill")).not_to_have_text("operator ann")
    expect(again.locator(".skill")).to_have_text("greeting")
    dialog_id = page.locator("#dialog-info code").get_attribute("title")
    stored = client.get(f"/api/dialogs/{dialog_id}", headers={"X-API-Key": API_KEY}).json()
    operators = [u.get("operator") for u in stored["utterances"] if u["speaker"] == "bot"]
    assert operators.count("ann") == 1, operators
