"""A conversation that continues as new runs (``continue_as_new``) in headless Chromium,
against real server and worker processes: the visitor stays in one chat while each answer
hands the conversation to a fresh run; the widget follows the session from run to run, live
and after a reload, and the server's runs are chained as the widget showed them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, expect

from .conftest import SESSION_OF_PAGE, screenshot
from .hosting import HostSite
from .stack import Stack
from .test_browser_ux import agent_page


def shows_the_whole_conversation(page: Page) -> None:
    cards = page.locator(".parley-prompt")
    expect(cards).to_have_count(3)
    for i, answer in enumerate(("alpha", "beta", "bye")):
        expect(cards.nth(i)).to_contain_text(f"Turn {i + 1}: what next?")
        expect(cards.nth(i)).to_have_attribute("data-state", "received")
        expect(cards.nth(i)).to_contain_text(f"You answered: {answer}")
    expect(page.get_by_text("Noted: alpha")).to_have_count(1)
    expect(page.get_by_text("Noted: beta")).to_have_count(1)
    expect(page.get_by_text("Goodbye after 3 turns.")).to_have_count(1)
    expect(page.locator(".parley-widget")).to_have_attribute("data-state", "idle")


def test_the_widget_follows_a_conversation_into_its_continued_runs(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = agent_page(page, site, make_stack, "widget_continued")
    box = page.get_by_label("Your message")
    box.fill("hello")
    box.press("Enter")
    for turn, answer in ((1, "alpha"), (2, "beta"), (3, "bye")):
        field = page.get_by_role("textbox", name=f"Turn {turn}: what next?")
        expect(field).to_be_visible()
        expect(field).to_be_focused()
        field.fill(answer)
        field.press("Enter")
    shows_the_whole_conversation(page)
    screenshot(page, "continue-1-three-runs")

    # the server: three runs, each continued to the next, the last completed
    assert stack.pending_hooks() == []
    session = page.evaluate(SESSION_OF_PAGE, [stack.url, "widget_continued"])
    chain = _runs_of_session(stack, session)
    assert [run["status"] for run in chain] == ["continued", "continued", "completed"]
    assert [run["continued_from"] for run in chain[1:]] == [run["run_id"] for run in chain[:-1]]

    page.reload()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    shows_the_whole_conversation(page)


def _runs_of_session(stack: Stack, session: str) -> list[dict[str, Any]]:
    """The session's runs (the console's listing), first to last along ``continued_to``."""
    listed = stack.http.get("/api/runs", params={"session": session}).json()["runs"]
    by_id = {run["run_id"]: run for run in listed}
    firsts = [run for run in listed if run["continued_from"] is None]
    assert len(firsts) == 1, listed
    chain = firsts
    while chain[-1]["continued_to"] is not None:
        chain.append(by_id[chain[-1]["continued_to"]])
    assert len(chain) == len(listed), listed
    return chain
