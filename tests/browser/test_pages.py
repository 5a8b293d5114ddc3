"""The pages in a real headless browser, against the real agent and real services.

Playwright's ``expect`` waits for the page to get there (up to its timeout): no sleeps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi import FastAPI

from response_selectors.confidence.app import app as confidence_app
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from tests.browser.conftest import SERVICES, parrot_skill, pipeline
from tests.conftest import AgentFactory, service_entry
from tests.support.servers import ServerThread

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]

KEY = "s3cret-key-for-tests-0123"
XSS = "<img src=x onerror=alert(1)>"
ALL_SERVICES = [name for names in SERVICES.values() for name in names]
#: The pipeline page refreshes every 3 s: give a refresh time to land.
REFRESH_TIMEOUT = 10_000


def url(client: httpx.Client, path: str) -> str:
    return f"{str(client.base_url).rstrip('/')}{path}"


def send(page: Page, text: str) -> Locator:
    """Type a message, send it, and return the bot's answer to it once it is shown."""
    answers = page.locator(".message.bot")
    count = answers.count()
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()
    expect(answers).to_have_count(count + 1)
    return answers.last


def test_chat_answers_with_the_skill_and_links_to_the_inspector(
    page: Page, stack: AgentFactory
) -> None:
    client = stack()
    page.goto(url(client, "/chat"))
    answer = send(page, "Hello!")
    expect(answer.locator(".text")).to_have_text("Hi! I'm Chorus. What's your name?")
    expect(answer.locator(".skill")).to_have_text("greeting")
    expect(page.locator(".message.human .text")).to_have_text("Hello!")

    page.get_by_role("link", name="Inspect this dialog").click()
    expect(page).to_have_url(re.compile(r"/inspect/[0-9a-f]{32}$"))
    turn = page.locator(".turn").first
    expect(turn.locator(".utterance.bot .text")).to_have_text("Hi! I'm Chorus. What's your name?")
    hypotheses = turn.locator("tr.hypothesis")
    expect(hypotheses).to_have_count(3)  # greeting, parrot, fallback; broken gave none
    chosen = turn.locator("tr.hypothesis.chosen")
    expect(chosen).to_have_count(1)
    expect(chosen.locator(".skill")).to_have_text("greeting")
    expect(chosen).to_contain_text("chosen")
    # What the hypothesis asks to change in the attributes the turn started from.
    expect(chosen.locator('.change[data-path="human.greeting_stage"]')).to_contain_text(
        '"asked_name"'
    )
    expect(hypotheses.filter(has_text="fallback")).to_contain_text('"chars"')  # lengths
    expect(turn.locator(".reason")).to_contain_text("greeting had the highest confidence")
    expect(turn.locator(".annotations-section")).to_contain_text('"tokens": [ "Hello", "!" ]')
    expect(turn.locator(".errors-section")).to_contain_text("broken")
    stage = turn.locator('.attribute-changes[data-side="human"] .change')
    expect(stage).to_have_attribute("data-path", "greeting_stage")
    expect(stage).to_contain_text('new "asked_name"')

    rows = turn.locator(".timeline-row")
    expect(rows).to_have_count(len(ALL_SERVICES))
    for name in ALL_SERVICES:
        outcome = "error" if name == "broken" else "ok"
        row = turn.locator(f'.timeline-row[data-service="{name}"]')
        expect(row).to_have_attribute("data-outcome", outcome)
        expect(row.locator(".timeline-bar")).to_have_attribute(
            "style", re.compile(r"left: [\d.e-]+%; width: [\d.e-]+%")
        )
    expect(turn.locator(".timeline-row.outcome-error")).to_have_count(1)


def test_the_user_id_is_kept_and_new_dialog_starts_another(page: Page, stack: AgentFactory) -> None:
    client = stack()
    page.goto(url(client, "/chat"))
    user = page.locator("#user-id")
    expect(user).to_have_text(re.compile(r"^web-[0-9a-f]{16}$"))
    user_id = user.text_content()
    send(page, "Hello!")
    link = page.get_by_role("link", name="Inspect this dialog")
    first = link.get_attribute("href")

    page.get_by_role("button", name="New dialog").click()
    expect(page.locator(".message.system")).to_have_text("New dialog: your next message starts it.")
    expect(page.locator(".message.bot")).to_have_count(0)
    expect(link).to_be_hidden()
    send(page, "Hello again")
    expect(link).to_be_visible()
    assert link.get_attribute("href") != first

    page.reload()
    expect(user).to_have_text(user_id or "")
    dialogs = client.get(f"/api/user/{user_id}").json()
    assert len(dialogs) == 2 and dialogs[0]["date_finish"] is not None


def test_pipeline_page_shows_every_service_and_live_numbers(
    page: Page, stack: AgentFactory
) -> None:
    client = stack()
    assert client.post("/", json={"user_id": "u", "payload": "Hello!"}).status_code == 200
    page.goto(url(client, "/pipeline"))
    for name in ALL_SERVICES:
        expect(page.locator(f'svg g.node[data-service="{name}"]')).to_contain_text(name)
        expect(page.locator(f'#stats tr[data-service="{name}"] [data-field="calls"]')).to_have_text(
            "1"
        )
    for role in SERVICES:
        expect(page.locator(f'svg g.stage[data-role="{role}"]')).to_be_visible()
    broken = page.locator('#stats tr[data-service="broken"]')
    expect(broken.locator('[data-field="error_rate"]')).to_have_text("100%")
    expect(page.locator('svg g.node[data-service="broken"]')).to_have_class(
        re.compile(r"\bfailing\b")
    )
    expect(page.locator('#stats tr[data-service="greeting"] [data-field="p50"]')).to_have_text(
        re.compile(r"^[\d.]+ (µs|ms|s)$")
    )
    expect(page.locator("#mermaid")).to_contain_text("flowchart LR")

    # The table follows the agent without a reload.
    assert client.post("/", json={"user_id": "u", "payload": "Hi"}).status_code == 200
    expect(page.locator('#stats tr[data-service="greeting"] [data-field="calls"]')).to_have_text(
        "2", timeout=REFRESH_TIMEOUT
    )


def test_pipeline_page_lists_a_disabled_service_and_why(
    page: Page, services: Any, agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    config = pipeline(services)
    config["services"]["skills"]["llm"] = service_entry(
        "http://127.0.0.1:9/respond", requires_env=["LLM_BASE_URL"]
    )
    client = agent(config)
    page.goto(url(client, "/pipeline"))
    row = page.locator('#disabled tr[data-service="llm"]')
    expect(row).to_contain_text("requires_env: LLM_BASE_URL not set")
    expect(page.locator("#disabled-section")).to_be_visible()
    expect(page.locator('svg g.node[data-service="llm"]')).to_have_count(0)


def test_markup_in_messages_and_service_output_shows_as_text(
    page: Page, stack: AgentFactory
) -> None:
    client = stack()
    page.goto(url(client, "/chat"))
    answer = send(page, XSS)  # the parrot skill says it back: service text too
    expect(page.locator(".message.human .text")).to_have_text(XSS)
    expect(answer.locator(".text")).to_have_text(XSS)
    expect(answer.locator(".skill")).to_have_text("parrot")
    expect(page.locator("#messages img")).to_have_count(0)

    page.get_by_role("link", name="Inspect this dialog").click()
    turn = page.locator(".turn").first
    expect(turn.locator(".utterance.human .text")).to_have_text(XSS)
    expect(turn.locator("tr.hypothesis.chosen .text")).to_have_text(XSS)
    expect(turn.locator("tr.hypothesis.chosen")).to_contain_text('"echo": "<img src=x')
    expect(page.locator("main img")).to_have_count(0)
    # An alert would have failed the test through the page fixture.


def test_with_an_api_key_the_inspector_asks_for_it(page: Page, stack: AgentFactory) -> None:
    client = stack(api_key=KEY)
    page.goto(url(client, "/chat"))
    send(page, "Hello!")  # the chat stays open without the key
    page.get_by_role("link", name="Inspect this dialog").click()
    prompt = page.get_by_role("alert")
    expect(prompt).to_contain_text("Enter the API key")
    expect(page.locator(".turn")).to_have_count(0)

    page.get_by_label("API key").fill("not-the-key")
    page.get_by_role("button", name="Use key").click()
    expect(prompt).to_contain_text("That is not the agent's API key")

    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Use key").click()
    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator("tr.hypothesis.chosen .skill")).to_have_text("greeting")

    # The key is kept for the tab: the pipeline page reads with it too.
    page.get_by_role("link", name="Pipeline").click()
    expect(page.locator('#stats tr[data-service="greeting"] [data-field="calls"]')).to_have_text(
        "1"
    )
    page.get_by_role("button", name="Forget API key").click()
    expect(page.get_by_role("alert")).to_contain_text("Enter the API key")


def test_the_inspector_shows_why_each_skill_was_skipped(
    page: Page,
    services: Callable[[FastAPI], ServerThread],
    agent: AgentFactory,
    tmp_path: Path,
) -> None:
    """The real intents annotator and rules selector (on rules of this test): "thanks!"
    is routed to smalltalk and fallback; greeting is skipped, and the inspector says why.
    The parrot skill, which no rule names, runs anyway."""
    from annotators.intents.app import app as intents_app
    from skill_selectors.rules.app import build_service, load_rules
    from skills.smalltalk.app import app as smalltalk_app

    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            {
                "on_toxic": ["fallback"],
                "always": ["fallback"],
                "intents": {"thanks": ["smalltalk"], "greeting": ["greeting"]},
                "min_intent_confidence": 0.7,
            }
        )
    )
    apps: dict[str, dict[str, FastAPI]] = {
        "annotators": {"intents": intents_app},
        "skill_selectors": {"rules": build_service(load_rules(rules)).app},
        "skills": {
            "greeting": greeting_app,
            "smalltalk": smalltalk_app,
            "parrot": parrot_skill(),
            "fallback": fallback_app,
        },
        "response_selectors": {"confidence": confidence_app},
    }
    client = agent(
        {
            "services": {
                group: {name: service_entry(services(app).url) for name, app in named.items()}
                for group, named in apps.items()
            }
        }
    )
    page.goto(url(client, "/chat"))
    send(page, "thanks!")
    page.get_by_role("link", name="Inspect this dialog").click()

    selection = page.locator(".turn").first.locator(".selection-section")
    decision = selection.locator('.selector-decision[data-selector="rules"]')
    expect(decision.locator(".chosen-skills")).to_have_text("smalltalk, fallback")
    expect(decision.locator(".selector-reason")).to_have_text(
        re.compile(r"^intent thanks \(\d\.\d\d\) → smalltalk, fallback$")
    )
    skipped = selection.locator(".skipped-skill")
    expect(skipped).to_have_count(1)
    expect(skipped).to_have_attribute("data-skill", "greeting")
    expect(skipped.locator(".skip-reason")).to_have_text(
        re.compile(r"^not chosen by rules: intent thanks \(\d\.\d\d\) → smalltalk, fallback$")
    )
    greeting_bar = page.locator('.timeline-row[data-service="greeting"] .timeline-bar')
    expect(greeting_bar).to_have_attribute("title", re.compile("not chosen by rules"))
    # No rule names the parrot: it ran, and its hypothesis is there.
    expect(page.locator('tr.hypothesis[data-skill="parrot"]')).to_have_count(1)


def test_the_load_page_reads_dp_agents_websocket(page: Page, stack: AgentFactory) -> None:
    client = stack()
    client.post("/", json={"user_id": "ann", "payload": "Hello!"})
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    page.goto(url(client, "/debug/current_load"))
    rows = page.locator("#rows tr")
    expect(rows.filter(has_text="agent").locator("td").nth(1)).to_have_text("0")
    expect(rows.filter(has_text="greeting")).to_have_count(1)  # a service's mean time
    assert sockets == [url(client, "/debug/current_load/ws").replace("http://", "ws://", 1)]
    expect(page.locator("#status")).to_have_text("")


def test_the_newest_answer_stays_above_the_send_box_once_the_page_fills(
    page: Page, stack: AgentFactory
) -> None:
    client = stack()
    page.goto(url(client, "/chat"))
    box = page.locator("#send-form")
    viewport = page.viewport_size or {"height": 0}
    listed = page.locator("#messages")
    answer = send(page, "Hello!")
    for number in range(1, 40):
        answer = send(page, f"Message number {number}, a line to fill the page with.")
        first = page.locator(".message").first.bounding_box()
        top = listed.bounding_box()
        assert first is not None and top is not None
        if first["y"] < max(0.0, top["y"]):  # the conversation no longer fits: it scrolled
            break
    else:
        pytest.fail("forty messages did not fill the page")
    expect(answer.locator(".text")).to_have_text(re.compile("Message number"))
    bubble = answer.locator(".bubble").bounding_box()
    form = box.bounding_box()
    assert bubble is not None and form is not None
    assert bubble["y"] >= 0, (bubble, form)  # in view, not scrolled past
    assert bubble["y"] + bubble["height"] <= form["y"], (bubble, form)
    assert form["y"] + form["height"] <= viewport["height"], (form, viewport)
