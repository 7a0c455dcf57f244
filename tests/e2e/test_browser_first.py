"""A prompt withdrawn by ``first(...)`` in headless Chromium against real server and worker
processes: the run asks two questions at once, the visitor answers one, and the other is
shown as closed (its controls disabled, a note saying why) — live, and after a reload
(the replayed prompt's state is ``closed``)."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Locator, Page, expect

from .conftest import SESSION_OF_PAGE, screenshot
from .hosting import HostSite
from .stack import Stack
from .test_browser_ux import agent_page

CLOSED_NOTE = "No answer needed any more — the agent went on without it."
# The session's replay, read by the page's own origin: the prompts' states.
REPLAYED_STATES = """async ([server, session]) => {
  const ws = new WebSocket(`${server.replace(/^http/, "ws")}/ws/sessions/${session}`);
  const prompts = [];
  return await new Promise((resolve) => {
    ws.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "prompt") prompts.push([frame.prompt, frame.state]);
      if (frame.type === "status") { ws.close(); resolve(prompts); }
    };
  });
}"""


def shows_answered_and_closed(page: Page) -> None:
    cards = page.locator(".parley-prompt")
    expect(cards).to_have_count(2)
    answered, closed = cards.nth(0), cards.nth(1)
    expect(answered).to_have_attribute("data-state", "received")
    expect(answered).to_contain_text("You answered: Email")
    expect(closed).to_contain_text("Or shall we close the ticket?")
    expect(closed).to_have_attribute("data-state", "closed")
    expect(closed).to_contain_text(CLOSED_NOTE)
    buttons: Locator = closed.get_by_role("button")
    expect(buttons).to_have_count(2)  # Yes / No, both disabled
    for i in range(2):
        expect(buttons.nth(i)).to_be_disabled()
    expect(page.get_by_text("Went with channel: Email.")).to_be_visible()
    expect(page.locator(".parley-widget")).to_have_attribute("data-state", "idle")
    expect(page.get_by_label("Your message")).to_be_enabled()


def test_the_prompt_a_first_withdrew_is_shown_closed_live_and_after_a_reload(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = agent_page(page, site, make_stack, "widget_first")
    box = page.get_by_label("Your message")
    box.fill("help")
    box.press("Enter")
    cards = page.locator(".parley-prompt")
    expect(cards).to_have_count(2)
    for i in range(2):
        expect(cards.nth(i)).to_have_attribute("data-state", "pending")
    expect(cards.nth(1).get_by_role("button", name="Yes")).to_be_enabled()
    cards.nth(0).get_by_role("button", name="Email").click()
    shows_answered_and_closed(page)
    screenshot(page, "first-1-closed")
    page.reload()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    shows_answered_and_closed(page)
    expect(page.get_by_text("Went with channel: Email.")).to_have_count(1)
    session = page.evaluate(SESSION_OF_PAGE, [stack.url, "widget_first"])
    assert page.evaluate(REPLAYED_STATES, [stack.url, session]) == [
        ["How should we reach you?", "received"],
        ["Or shall we close the ticket?", "closed"],
    ]


def test_a_childs_prompt_that_lost_a_first_is_closed_and_the_chat_is_ready_again(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    """A child run asks in the chat, and its parent's first() goes on without it (a
    moment wins): the prompt is shown closed, the chat does not say the conversation
    stopped, and once the parent ends it is ready again: a message the visitor wrote while
    the child asked is sent then (a new run asks). Found by review: with the child's prompt
    the last the chat had seen, it waited on the cancelled child for good ("working"), and
    held the message back."""
    agent_page(page, site, make_stack, "widget_first_child")
    box = page.get_by_label("Your message")
    box.fill("help")
    box.press("Enter")
    cards = page.locator(".parley-prompt")
    expect(cards).to_have_count(1)
    expect(cards.nth(0)).to_contain_text("Anything to add?")
    box.fill("again")  # not an answer: queued while the prompt waits
    box.press("Enter")
    expect(cards.nth(0)).to_have_attribute("data-state", "closed", timeout=15_000)
    expect(cards.nth(0)).to_contain_text(CLOSED_NOTE)
    expect(page.get_by_text("The conversation was stopped.")).to_have_count(0)
    expect(cards).to_have_count(2)  # "again" went, and started a run that asks
    expect(cards.nth(1)).to_have_attribute("data-state", "pending")
    expect(cards.nth(1)).to_have_attribute("data-state", "closed", timeout=15_000)
    expect(page.locator(".parley-widget")).to_have_attribute("data-state", "idle")
