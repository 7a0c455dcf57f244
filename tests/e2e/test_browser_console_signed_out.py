"""The console without a valid key, in headless Chromium against a real server: it shows
no section and no count of approvals, and a key the server stops accepting while the
console is open (removed, the server restarted with other keys) is said as such.

The sections' navigation (with the number of approvals waiting) was hidden by its
``hidden`` attribute only, which the console's own ``display: flex`` overrode: it showed
on the sign-in page, and after a refused key it kept the last count read with that key.
And a key refused while the console was open ended on "Signed out.", which the operator
had not done."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .stack import Stack
from .test_browser_console import OPERATOR, assert_accessible, sign_in, start_agent

REFUSED = (
    "This server no longer accepts your key (it was removed or changed): nothing more is "
    "shown. Sign in again with a valid key."
)


def test_a_key_refused_while_the_console_is_open_is_said_and_nothing_stays(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_API_KEYS=f"ops:operator:{OPERATOR}")
    start_agent(stack)
    sections = page.get_by_role("navigation", name="Console sections")
    page.goto(stack.url + "/console")
    expect(page.get_by_label("API key")).to_be_visible()
    expect(sections).to_be_hidden()  # signed out: no sections
    page.get_by_label("API key").fill("not-a-key-0123456789")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("the API key is not valid")
    expect(sections).to_be_hidden()

    sign_in(page, stack, OPERATOR)
    page.get_by_role("link", name="Approvals inbox").click()
    expect(page.locator(".pc-hook")).to_have_count(1)
    expect(page.locator("#pc-inbox-count")).to_have_text("1")
    # The key is removed: the server restarts with another one.
    stack.stop_server()
    stack.env["PARLEY_API_KEYS"] = "other:operator:another-secret-0123456789"
    stack.start_server()
    expect(page.get_by_role("alert")).to_have_text(REFUSED, timeout=10_000)
    expect(page.get_by_label("API key")).to_be_visible()
    expect(sections).to_be_hidden()
    expect(page.locator(".pc-hook")).to_have_count(0)
    assert page.evaluate("sessionStorage.length") == 0
    assert_accessible(page, "sign-in page after a refused key")

    # Signed out by the operator: said so.
    sign_in(page, stack, "another-secret-0123456789")
    expect(page.locator("#pc-inbox-count")).to_have_text("1")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("alert")).to_have_text("Signed out.")
    expect(sections).to_be_hidden()
