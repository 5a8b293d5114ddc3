"""A real headless browser for the page tests: Debian's Chromium driven by Playwright.

Why Debian's Chromium (``/usr/bin/chromium``, installed by ``tools/ensure.sh chromium``)
and not ``playwright install``: the browser must come from somewhere this machine can
reach. Playwright drives it through ``executable_path``.

Without Playwright or Chromium the browser tests skip with what to install, unless
``REQUIRE_BROWSER=1`` (as in CI) makes that a failure, like ``REQUIRE_MONGODB``.
The pages do not depend on the store, so these tests run on SQLite only.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis
from annotators.tokens.app import app as tokens_app
from response_selectors.confidence.app import app as confidence_app
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry
from tests.support.services import length_candidate_annotator, raw_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

#: The browser binary; ``CHROMIUM`` points elsewhere (e.g. a Chromium on another system).
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))


def unavailable_reason() -> str | None:
    """Why no browser can be driven here (with how to get one), or None if one can."""
    if importlib.util.find_spec("playwright") is None:
        return (
            "Playwright for Python is not installed: "
            ".venv/bin/pip install 'playwright>=1.65' (only the Python package: the "
            "browser is Debian's chromium, no `playwright install`)"
        )
    if not os.access(CHROMIUM, os.X_OK):
        return (
            f"no Chromium at {CHROMIUM}: run `sh tools/ensure.sh chromium` (installs "
            "Debian's chromium with apt-get) or set CHROMIUM=/path/to/chromium"
        )
    return None


def browser_required() -> bool:
    """Whether a missing browser fails the tests instead of skipping them (CI)."""
    return os.environ.get("REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the browser tests, closed after the last of them."""
    reason = unavailable_reason()
    if reason is not None:
        if browser_required():
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Chromium refuses to start its sandbox as root (containers, CI): go without it there.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab (own storage) that fails the test on a script error or an alert."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))

    def dialog(opened: Any) -> None:
        problems.append(f"the page opened a {opened.type} dialog: {opened.message!r}")
        opened.dismiss()

    tab.on("dialog", dialog)
    try:
        yield tab
    finally:
        context.close()
    assert not problems, problems


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: what the pages show does not depend on the store."""
    return f"sqlite:///{tmp_path}/chorus.db"


def parrot_skill() -> FastAPI:
    """Says the user's text back (confidence 0.5: below a greeting, above the fallback),
    with it as an extra field too: service text on every part of the pages."""
    service = Service("parrot")

    @service.skill
    def repeat(dialog: DialogView) -> SkillHypothesis:
        text = dialog.human_utterance.text
        return SkillHypothesis(text=text, confidence=0.5, echo=text)

    return service.app


#: The services of the pages' pipeline, by stage.
SERVICES = {
    "annotators": ["tokens"],
    "skills": ["greeting", "parrot", "fallback", "broken"],
    "candidate_annotators": ["lengths"],
    "response_selectors": ["confidence"],
}


def pipeline(services: Any) -> dict[str, Any]:
    """The reference services, an echoing skill, a broken one (HTTP 500) and a candidate
    annotator: every part of the inspector and of the pipeline page has something."""
    apps: dict[str, FastAPI] = {
        "tokens": tokens_app,
        "greeting": greeting_app,
        "parrot": parrot_skill(),
        "fallback": fallback_app,
        "broken": raw_app("down", status=500),
        "lengths": length_candidate_annotator(),
        "confidence": confidence_app,
    }
    return {
        "services": {
            group: {name: service_entry(services(apps[name]).url) for name in names}
            for group, names in SERVICES.items()
        }
    }


@pytest.fixture
def stack(services: Any, agent: AgentFactory) -> AgentFactory:
    """``stack(**settings)``: the agent on :func:`pipeline` with real services, as an
    HTTP client whose ``base_url`` the browser opens."""

    def start(**settings: Any) -> httpx.Client:
        return agent(pipeline(services), **settings)

    return start
