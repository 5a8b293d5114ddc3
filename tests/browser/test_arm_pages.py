"""The pages with an experiment running: the /pipeline page lists the arms and their live
turns, the inspector shows the dialog's arm."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.api.test_arms import Services, arm_pipelines, experiment_file, say
from tests.browser.test_pages import REFRESH_TIMEOUT, url
from tests.conftest import AgentFactory

if TYPE_CHECKING:
    from playwright.sync_api import Page

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails, with REQUIRE_BROWSER=1) and says why
    expect = None  # type: ignore[assignment]


def test_the_pipeline_page_lists_the_arms_and_the_inspector_shows_a_dialogs_arm(
    page: Page, services: Services, agent: AgentFactory, tmp_path: Path
) -> None:
    arm_pipelines(services, tmp_path)
    client = agent({}, experiment=experiment_file(tmp_path, {"a": 1, "b": 3}))
    answers = [say(client, f"user-{i}") for i in range(8)]
    on_a = sum(answer["response"] == "arm a" for answer in answers)

    page.goto(url(client, "/pipeline"))
    expect(page.locator("#experiment-name")).to_have_text("trial")
    row_a, row_b = page.locator('#arms tr[data-arm="a"]'), page.locator('#arms tr[data-arm="b"]')
    expect(row_a).to_contain_text("a.json")
    expect(row_a.locator("td").nth(2)).to_have_text("25%")
    expect(row_b.locator("td").nth(2)).to_have_text("75%")
    expect(row_a.locator("td").nth(3)).to_have_text(str(on_a))
    expect(row_b.locator("td").nth(3)).to_have_text(str(len(answers) - on_a))
    # The turns follow the agent without a reload.
    say(client, "user-0", "again")
    first_arm = row_a if answers[0]["response"] == "arm a" else row_b
    before = on_a if first_arm is row_a else len(answers) - on_a
    expect(first_arm.locator("td").nth(3)).to_have_text(str(before + 1), timeout=REFRESH_TIMEOUT)

    dialog_id = answers[0]["dialog_id"]
    page.goto(url(client, f"/inspect/{dialog_id}"))
    expect(page.locator("dd.arm")).to_have_text(answers[0]["response"].removeprefix("arm "))
