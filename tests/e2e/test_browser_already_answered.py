"""An answer refused as ``hook_already_answered`` in headless Chromium against real server
and worker processes: two tabs of one conversation show the same question; one answers,
and the other, which has not heard of that answer yet (its session frames held back),
answers otherwise. The refusal is final: the question has its answer. The card showed
"Not accepted: the question was already answered" and took an answer again, each one
refused the same way; it is settled as answered, and says which answer once it hears."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .hosting import HostSite
from .stack import Stack
from .test_browser_delivery import SOCKET, Relay, connected, pump_until
from .test_browser_ux import agent_page


def test_an_answer_refused_as_already_answered_settles_its_card_as_answered(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    agent_page(page, site, make_stack, "widget_kinds")
    other = page.context.new_page()
    relay = Relay()
    other.route_web_socket(SOCKET, relay)
    other.goto(site.url())
    connected(other)
    box = page.get_by_label("Your message")
    box.fill("start")
    box.press("Enter")
    here, there = page.locator(".parley-prompt").nth(0), other.locator(".parley-prompt").nth(0)
    expect(here.get_by_role("button", name="Pro")).to_be_enabled()
    expect(there.get_by_role("button", name="Pro")).to_be_enabled()
    relay.hold = True  # the other tab does not hear of this tab's answer yet
    here.get_by_role("button", name="Free").click()
    expect(here).to_have_attribute("data-state", "received")
    pump_until(other, lambda: bool(relay.held), "the answer, held back from the other tab")
    there.get_by_role("button", name="Pro").click()
    pump_until(
        other,
        lambda: any(r.get("error") == "hook_already_answered" for r in relay.replies),
        "hook_already_answered",
    )
    expect(there).to_have_attribute("data-state", "received")
    expect(there).to_contain_text("Answered.")
    expect(there).not_to_contain_text("Not accepted")
    for name in ("Free", "Pro"):
        expect(there.get_by_role("button", name=name)).to_be_disabled()
    relay.release()
    expect(there).to_contain_text("You answered: Free")
    expect(there).to_have_attribute("data-state", "received")
    expect(other.get_by_role("button", name="Yes")).to_be_enabled()  # the next question
    answers = [f for f in relay.sent if f.get("type") == "answer"]
    assert [a["payload"] for a in answers] == ["Pro"]  # refused once, not sent again
