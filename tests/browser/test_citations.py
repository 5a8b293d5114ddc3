"""/chat lists the sources an answer cites (its attributes' ``citations``), in a real
headless browser against the real agent: a web address as a link, a file by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.sdk import DialogView, Service, SkillHypothesis
from response_selectors.confidence.app import app as confidence_app
from tests.browser.test_pages import send, url
from tests.conftest import AgentFactory, service_entry

if TYPE_CHECKING:
    from playwright.sync_api import Page

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]


def citing_skill() -> Any:
    """Answers every turn citing a file of the docs and a page on the web."""
    service = Service("citer")

    @service.skill
    def cite(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(
            text="Run chorus import [1], as the handbook says [2].",
            confidence=0.9,
            citations=[
                {
                    "n": 1,
                    "source": "docs/backup.md",
                    "section": "Restoring",
                    "link": "docs/backup.md#restoring",
                },
                {
                    "n": 2,
                    "source": "handbook/plans.html",
                    "section": "The Pro plan",
                    "link": "https://handbook.example.org/plans.html#pro-plan",
                },
            ],
        )

    return service.app


def test_the_cited_sources_are_listed_under_the_answer(
    page: Page, services: Any, agent: AgentFactory
) -> None:
    pipeline = {
        "services": {
            "skills": {"citer": service_entry(services(citing_skill()).url)},
            "response_selectors": {"confidence": service_entry(services(confidence_app).url)},
        }
    }
    client = agent(pipeline)
    page.goto(url(client, "/chat"))
    answer = send(page, "How do I restore a backup?")
    sources = answer.locator(".citations li")
    expect(sources).to_have_count(2)
    expect(sources.nth(0)).to_have_text("docs/backup.md \u203a Restoring")
    # A file's path would resolve against the agent's address: named, with no link.
    local = sources.nth(0).locator("a")
    expect(local).to_have_attribute("title", "docs/backup.md#restoring")
    assert local.get_attribute("href") is None
    web = sources.nth(1).get_by_role("link", name="handbook/plans.html \u203a The Pro plan")
    expect(web).to_have_attribute("href", "https://handbook.example.org/plans.html#pro-plan")
