"""An answer refused as ``hook_closed`` in headless Chromium against real server and worker
processes: the run asks two questions at once (``first(...)``), the visitor answers one,
and the page does not hear yet that the other was withdrawn (its session frames held back);
an answer to the withdrawn one is refused as closed, and the card says so in plain words
and takes no answer again (no resend loop)."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .hosting import HostSite
from .stack import Stack
from .test_browser_delivery import SOCKET, Relay, pump_until
from .test_browser_first import CLOSED_NOTE
from .test_browser_ux import agent_page


def test_an_answer_refused_as_closed_settles_its_card_as_closed(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    relay = Relay()
    page.route_web_socket(SOCKET, relay)
    agent_page(page, site, make_stack, "widget_first")
    box = page.get_by_label("Your message")
    box.fill("help")
    box.press("Enter")
    cards = page.locator(".parley-prompt")
    expect(cards).to_have_count(2)
    expect(cards.nth(1).get_by_role("button", name="Yes")).to_be_enabled()
    relay.hold = True  # the page does not hear that the other question was withdrawn
    cards.nth(0).get_by_role("button", name="Email").click()
    pump_until(page, lambda: any(r.get("type") == "ack" for r in relay.replies), "the ack")
    pump_until(page, lambda: bool(relay.held), "the withdrawal, held back")
    cards.nth(1).get_by_role("button", name="Yes").click()
    pump_until(
        page, lambda: any(r.get("error") == "hook_closed" for r in relay.replies), "hook_closed"
    )
    closed = cards.nth(1)
    expect(closed).to_have_attribute("data-state", "closed")
    expect(closed).to_contain_text(CLOSED_NOTE)
    expect(closed).not_to_contain_text("something went wrong")
    for i in range(2):
        expect(closed.get_by_role("button").nth(i)).to_be_disabled()
    relay.release()
    expect(cards.nth(0)).to_have_attribute("data-state", "received")
    expect(closed).to_have_attribute("data-state", "closed")
    expect(page.get_by_text("Went with channel: Email.")).to_be_visible()
    answers = [f for f in relay.sent if f.get("type") == "answer"]
    assert len(answers) == 2  # the refused one was not sent again


def test_hook_closed_is_said_in_plain_words_in_french(page: Page, stack: Stack) -> None:
    page.goto(stack.url)
    said = page.evaluate(
        """async (base) => {
          const { translator, reason } = await import(new URL("widget/i18n.js", base).href);
          return ["en", "fr"].map((lang) => reason(translator(lang), "hook_closed"));
        }""",
        stack.url,
    )
    assert said == [
        "the question was closed — the agent went on without it",
        "la question a été close — l\u2019agent a continué sans elle",
    ]
