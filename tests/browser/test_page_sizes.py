"""The pages at a phone's size (390 by 700) and a desktop's (1,200 wide), on the reference
pipeline (pipeline.json, with the LLM skill on and its endpoint a local server): each page
fits the window's width; the chat keeps the answer being written in view while the services
report; the pipeline's graph shows every stage without a scrollbar, each label inside its
box; the inspector shows what each turn changed, and the bot's persona, which stays in the
bot's attributes from the turn a skill set it, once; the operator inbox puts its queue
beside the open dialog on a desktop and above it on a phone.

What is asserted is where things are and what is folded, never a page's height in pixels
(which depends on the fonts)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
from fastapi import FastAPI

from tests.browser.test_inbox import ASK, OPERATOR_KEY, handoff_pipeline, sign_in
from tests.browser.test_pages import send, url
from tests.conftest import AgentFactory
from tests.e2e.test_default_pipeline import REFERENCE, say
from tests.e2e.test_llm_tiers import SKY, with_llm
from tests.support.openai_stream import StreamingOpenAI
from tests.support.servers import ServerThread

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page, ViewportSize

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]

PHONE: ViewportSize = {"width": 390, "height": 700}
DESKTOP: ViewportSize = {"width": 1200, "height": 900}
WIDE: ViewportSize = {"width": 1600, "height": 900}
SIZES = pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["phone", "desktop"])

#: A conversation of fifteen turns on the reference skills: the smalltalk skill answers
#: the third turn first (the bot's persona arrives in its attributes, to stay there) and
#: many after it, the LLM one.
CONVERSATION = [
    "Hello!",
    "My name is Ann",
    "How are you?",
    "What can you do?",
    "Explain why the sky is blue.",
    "Where do you live?",
    "What are your hobbies?",
    "Do you like music?",
    "Thanks!",
    "Tell me a joke",
    "What is my name?",
    "What's your favourite colour?",
    "I feel sad today",
    "Who are you?",
    "Bye",
]
#: A key of the persona (skills/smalltalk/persona.json) no answer says.
PERSONA_KEY = '"templates"'


def operator_headers() -> dict[str, str]:
    return {"X-Operator-Key": OPERATOR_KEY, "X-Operator": "ann"}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Open: the LLM answers at once. A test closes it to hold the LLM's first token."""
    opened = threading.Event()
    opened.set()
    yield opened
    opened.set()  # never leave the endpoint waiting


@pytest.fixture
def reference(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
    gate: threading.Event,
) -> httpx.Client:
    """The agent on pipeline.json, its LLM skill on and pointed at a local endpoint, and
    its handoff skill on (an operator key is set)."""
    monkeypatch.setenv("CHORUS_OPERATOR_KEY", OPERATOR_KEY)
    model = StreamingOpenAI(SKY, hold=gate)
    endpoint = services(model.app)
    return with_llm(agent, services, monkeypatch, f"{endpoint.url}/v1")


def overflow(page: Page) -> int:
    """How far the document is wider than the window (0: no horizontal scrolling)."""
    width: int = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return width


@SIZES
def test_the_answer_being_written_stays_in_view_while_the_services_report(
    page: Page, reference: httpx.Client, gate: threading.Event, size: ViewportSize
) -> None:
    page.set_viewport_size(size)
    page.goto(url(reference, "/chat"))
    listed = page.locator("#messages")
    for number in range(1, 40):
        send(page, f"Message number {number}, a line to fill the page with.")
        first, top = page.locator(".message").first.bounding_box(), listed.bounding_box()
        assert first is not None and top is not None
        if first["y"] < top["y"]:  # the conversation no longer fits: it scrolled
            break
    else:
        pytest.fail("forty messages did not fill the page")

    gate.clear()  # the LLM holds its first token: the turn shows only the services' progress
    page.get_by_label("Message").fill("Explain why the sky is blue.")
    page.get_by_role("button", name="Send").click()
    live = page.locator(".message.live")
    for service in [*REFERENCE["annotators"], "rules", "greeting", "faq", "smalltalk", "fallback"]:
        expect(live.locator(".progress")).to_contain_text(service)
    expect(live.locator(".text")).to_have_text("")  # no token yet
    bubble = live.locator(".bubble").bounding_box()
    box = listed.bounding_box()
    form = page.locator("#send-form").bounding_box()
    assert bubble is not None and box is not None and form is not None
    assert box["y"] <= bubble["y"], (bubble, box)
    assert bubble["y"] + bubble["height"] <= form["y"], (bubble, form)
    assert overflow(page) == 0

    gate.set()
    expect(page.locator(".message.bot").last.locator(".text")).to_have_text("".join(SKY))
    expect(live).to_have_count(0)


#: Each stage and each box inside the graph's box, each label inside its own box: the
#: problems, as sentences (none when the graph fits).
GRAPH_PROBLEMS = """() => {
  const graph = document.getElementById("graph");
  const box = graph.getBoundingClientRect();
  const problems = [];
  if (graph.scrollWidth > graph.clientWidth) {
    problems.push(`the graph scrolls: ${graph.scrollWidth} in ${graph.clientWidth}`);
  }
  for (const part of graph.querySelectorAll("g.stage, g.node")) {
    const name = part.dataset.role || part.dataset.service;
    const rect = part.querySelector("rect").getBoundingClientRect();
    if (rect.left < box.left || rect.right > box.right) {
      problems.push(`${name} is outside the graph's box`);
    }
    for (const text of part.querySelectorAll("text")) {
      const label = text.getBoundingClientRect();
      if (label.left < rect.left || label.right > rect.right) {
        problems.push(`${name}'s label ${text.textContent} is outside its box`);
      }
    }
  }
  return problems;
}"""


@pytest.mark.parametrize("size", [PHONE, DESKTOP, WIDE], ids=["phone", "desktop", "wide"])
def test_the_pipeline_graph_fits_its_box_with_every_label_inside(
    page: Page, reference: httpx.Client, size: ViewportSize
) -> None:
    page.set_viewport_size(size)
    page.goto(url(reference, "/pipeline"))
    for names in REFERENCE.values():
        for name in names:  # the llm and handoff skills too: their variables are set
            expect(page.locator(f'svg g.node[data-service="{name}"]')).to_be_visible()
            expect(page.locator(f'#stats tr[data-service="{name}"]')).to_be_visible()
    for role in REFERENCE:
        expect(page.locator(f'svg g.stage[data-role="{role}"]')).to_be_visible()
    assert page.evaluate(GRAPH_PROBLEMS) == []
    assert overflow(page) == 0


def turn(page: Page, number: int) -> Locator:
    return page.locator(f'.turn[data-turn="{number}"]')


@SIZES
def test_fifteen_turns_show_what_each_changed_and_the_persona_once(
    page: Page, reference: httpx.Client, size: ViewportSize
) -> None:
    answers = [say(reference, text) for text in CONVERSATION]
    skills = [answer["active_skill"] for answer in answers]
    assert skills[2] == "smalltalk" and skills.count("smalltalk") > 5, skills
    page.set_viewport_size(size)
    page.goto(url(reference, f"/inspect/{answers[-1]['dialog_id']}"))
    expect(page.locator(".turn")).to_have_count(len(CONVERSATION))

    # The persona is shown once, in the bot's attributes at the top; each turn folds it.
    persona = page.locator("pre.json").filter(has_text=PERSONA_KEY)
    expect(persona.filter(visible=True)).to_have_count(1)
    expect(page.locator("#summary pre.json").filter(has_text=PERSONA_KEY)).to_be_visible()
    # Each turn, what it changed: the user's name on the second, the persona on the third.
    name = turn(page, 2).locator('.attribute-changes[data-side="human"] .change[data-path="name"]')
    expect(name).to_have_class("change added")
    expect(name).to_contain_text('"Ann"')
    arrived = turn(page, 3).locator('.attribute-changes[data-side="bot"] .change')
    expect(arrived.filter(has_text="persona")).to_have_class("change added")
    # A later smalltalk turn added to the skill's recent lines: that is its one change; the
    # persona is in the bot's attributes after the turn, folded.
    later = turn(page, skills.index("smalltalk", 3) + 1)
    changed = later.locator('.attribute-changes[data-side="bot"] .change')
    expect(changed).to_have_count(1)
    expect(changed).to_have_attribute("data-path", "smalltalk_recent")
    expect(changed).to_have_class("change appended")
    folded = later.locator("details.all-attributes pre.json").filter(has_text=PERSONA_KEY)
    expect(folded).to_have_count(1)
    expect(folded).to_be_hidden()
    assert overflow(page) == 0


@SIZES
def test_the_operator_inbox_fits_with_the_queue_beside_or_above_the_dialog(
    page: Page,
    services: Callable[[FastAPI], ServerThread],
    agent: AgentFactory,
    size: ViewportSize,
) -> None:
    client = agent(handoff_pipeline(services), operator_key=OPERATOR_KEY)
    for text in ["Hello!", "My name is Ann", "What can you do?", ASK]:
        say(client, text)
    (entry,) = client.get("/api/operator/dialogs", headers=operator_headers()).json()["dialogs"]
    dialog_id = entry["handoff"]["dialog_id"]
    client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator_headers())
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator_headers(),
        json={"text": "Hi, I'm Ann from the support team. " * 6},
    )

    page.set_viewport_size(size)
    page.goto(url(client, "/inbox"))
    sign_in(page, "ann", OPERATOR_KEY)
    page.locator("#held .queue-entry").click()
    expect(page.locator("#history .message.by-operator")).to_have_count(1)
    expect(page.get_by_label("Reply")).to_be_visible()
    page.locator("#inspector > summary").click()
    expect(page.locator("#turns .turn")).to_have_count(5)
    assert overflow(page) == 0

    # The history opens on its newest message, the operator's, in view.
    newest = page.locator("#history .message").last.bounding_box()
    listed = page.locator("#history").bounding_box()
    assert newest is not None and listed is not None
    assert listed["y"] <= newest["y"], (listed, newest)
    assert newest["y"] + newest["height"] <= listed["y"] + listed["height"] + 1, (listed, newest)
    queue = page.locator(".queue").bounding_box()
    panel = page.locator("#dialog").bounding_box()
    reply = page.get_by_label("Reply").bounding_box()
    assert queue is not None and panel is not None and reply is not None
    if size["width"] < 700:  # a phone: the queue above the dialog, each the window's width
        assert panel["y"] >= queue["y"] + queue["height"], (queue, panel)
    else:  # a desktop: side by side
        assert panel["x"] >= queue["x"] + queue["width"], (queue, panel)
    assert reply["x"] + reply["width"] <= size["width"], reply
