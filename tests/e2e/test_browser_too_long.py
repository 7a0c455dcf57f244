"""A chat message too long to send (its frame over the server's ``max_frame_bytes``,
refused by the page before it is sent), in headless Chromium against real server and
worker processes. No second try of the same text can go, so it is not offered a Retry
(which failed again at once): its text goes back into the message box, to shorten and send
again, and the visitor is told so. While the visitor is writing something else there, the
text is not put over it: the message offers Edit, which puts it back before the draft."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from .stack import Stack
from .test_browser_a11y import serious
from .test_browser_oversize import FRAME_TOO_LONG, LONG
from .test_browser_unsent import CLOUD, relayed

BACK_IN_BOX = f"Not sent: {FRAME_TOO_LONG} (it is back in the message box)"


def refused_as_too_long(page: Page) -> Locator:
    """The visitor bubble of a message too long to send, sent by the page's API."""
    page.evaluate(f"window.parley.send('x'.repeat({LONG}))")
    bubble = page.locator(".parley-visitor").nth(0)
    expect(bubble).to_have_attribute("data-state", "failed")
    return bubble


def test_a_message_too_long_to_send_goes_back_into_the_message_box(
    page: Page, stack: Stack
) -> None:
    relay = relayed(page, stack)
    long = refused_as_too_long(page)
    note = long.locator(".parley-note")
    # no Retry: it would fail again at once, as it is
    expect(long.get_by_role("button")).to_have_count(0)
    expect(note).to_have_text(BACK_IN_BOX)
    box = page.get_by_label("Your message")
    assert box.input_value() == "x" * LONG
    expect(box).to_be_focused()
    assert serious(page) == []
    box.fill("my worker crashed")  # shortened
    box.press("Enter")
    expect(page.locator(".parley-visitor").nth(1)).to_have_attribute("data-state", "sent")
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    assert relay.messages("x" * LONG) == []
    assert len(relay.messages("my worker crashed")) == 1
    # the box has it now, not the page's store: a reload does not bring it back to send
    page.reload()
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
    expect(box).to_have_value("")


def test_a_message_too_long_to_send_does_not_overwrite_what_the_visitor_is_writing(
    page: Page, stack: Stack
) -> None:
    relayed(page, stack)
    box = page.get_by_label("Your message")
    box.fill("a draft")
    long = refused_as_too_long(page)
    note = long.locator(".parley-note")
    expect(note).to_have_text(f"Not sent: {FRAME_TOO_LONG}")
    expect(box).to_have_value("a draft")
    expect(long.get_by_role("button", name="Retry")).to_have_count(0)
    edit = long.get_by_role("button", name="Edit")
    assert serious(page) == []
    edit.click()
    expect(note).to_have_text(BACK_IN_BOX)
    assert box.input_value() == "x" * LONG + " a draft"
    expect(box).to_be_focused()
    expect(edit).to_have_count(0)
