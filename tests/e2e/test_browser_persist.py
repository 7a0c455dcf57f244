"""Conversations that persist: a new browser with the same storage gets the conversation
back from the server (history and pending prompt, once), a second tab stays in sync, a
new conversation is followed by every tab, and an expired one says so."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, Page, expect

from tests.processes import wait_until

from .conftest import screenshot
from .stack import Stack

FINAL = "your runs will resume where they stopped."
STORAGE_KEY = "parley:v1:{origin}:default"


def ask(page: Page, stack: Stack, text: str = "my worker crashed") -> None:
    page.goto(stack.url)
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_enabled()


def stored(page: Page, stack: Stack) -> dict[str, Any]:
    value: dict[str, Any] = page.evaluate(
        "key => JSON.parse(localStorage.getItem(key))", STORAGE_KEY.format(origin=stack.url)
    )
    return value


def test_a_new_browser_with_the_same_storage_gets_the_conversation_back(
    browser: Browser, stack: Stack
) -> None:
    first = browser.new_context()
    page = first.new_page()
    ask(page, stack)
    session = stored(page, stack)["session"]
    [hook] = stack.pending_hooks()
    state = first.storage_state()
    first.close()  # the tab, and the browser, are gone

    second = browser.new_context(storage_state=state)
    try:
        page = second.new_page()
        page.goto(stack.url)
        expect(page.get_by_text(FINAL)).to_have_count(0)
        expect(page.locator(".parley-prompt")).to_have_count(1)
        expect(page.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
        expect(page.get_by_text("Let me look that up for you.")).to_have_count(1)
        expect(page.get_by_text("The agent is waiting for your answer.")).to_be_visible()
        assert stored(page, stack)["session"] == session
        page.get_by_role("button", name="Parley Self-hosted").click()
        expect(page.get_by_text("Thanks! For Parley Self-hosted")).to_contain_text(FINAL)
        screenshot(page, "persist-1-new-browser")
    finally:
        second.close()
    run_url = f"/api/runs/{hook['run_id']}"
    wait_until(lambda: stack.http.get(run_url).json()["status"] == "completed", 10, "completion")


def test_a_second_tab_stays_in_sync(page: Page, stack: Stack) -> None:
    page.goto(stack.url)
    other = page.context.new_page()
    other.goto(stack.url)
    for tab in (page, other):
        expect(tab.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    assert stored(page, stack)["session"] == stored(other, stack)["session"]
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    expect(other.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
    other.get_by_role("button", name="Something else").click()
    expect(page.get_by_text("You answered: Something else")).to_be_visible()
    expect(page.get_by_text("Thanks! For Something else")).to_contain_text(FINAL)
    expect(other.get_by_text("Thanks! For Something else")).to_contain_text(FINAL)
    for tab in (page, other):
        expect(tab.locator(".parley-prompt")).to_have_count(1)
        expect(tab.locator(".parley-agent")).to_have_count(3)

    # A new conversation in one tab: the other follows.
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".parley-msg")).to_have_count(0)
    expect(other.locator(".parley-msg")).to_have_count(0)
    expect(page.get_by_label("Your message")).to_be_focused()
    new_session = stored(page, stack)["session"]
    expect(other.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    assert stored(other, stack)["session"] == new_session
    box.fill("please email me")
    box.press("Enter")
    expect(other.get_by_text("Which email address should we use to reach you?")).to_be_visible()
    screenshot(other, "persist-2-second-tab")


def test_a_conversation_the_server_no_longer_has_says_it_expired(page: Page, stack: Stack) -> None:
    ask(page, stack)
    session = stored(page, stack)["session"]
    client = stack.redis()
    try:  # what the retention does to an old conversation
        for key in client.scan_iter(match=f"parley:*session:{session}:*"):
            client.delete(key)
    finally:
        client.close()
    page.reload()
    expect(page.get_by_text("This conversation has expired.")).to_be_visible()
    expect(page.get_by_text("no such session")).to_have_count(0)
    screenshot(page, "persist-3-expired")
    page.get_by_role("button", name="Start a new conversation").click()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    assert stored(page, stack)["session"] != session
    box = page.get_by_label("Your message")
    expect(box).to_be_focused()
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_enabled()
