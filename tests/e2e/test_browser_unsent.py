"""What the visitor wrote and the server has not confirmed (queued offline or while the
agent is busy, or refused) is never dropped by a change of conversation: "New conversation"
in this tab or in another tab of the same conversation carries it into the new one, where
it is sent (or stays refused, with its Retry). Nor by a reload: it is kept in the browser's
storage and sent by the page that takes it over, once (by one tab of two), with its client
id (a message the server had already taken before the reload is shown and started once).

The socket is kept down across a reload with Playwright's websocket routing (the page
itself still loads)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, expect

from .conftest import SESSION_OF_PAGE
from .stack import Stack
from .test_browser_delivery import SOCKET, Relay, connected

CLOUD = "Parley Cloud"  # a choice of the demo agent's question: the message's run has begun


def relayed(page: Page, stack: Stack, *, every_tab: bool = False) -> Relay:
    """The page opened with its websockets (every tab's, with ``every_tab``) through a relay."""
    relay = Relay()
    (page.context if every_tab else page).route_web_socket(SOCKET, relay)
    page.goto(stack.url)
    connected(page)
    return relay


def write_offline(page: Page, relay: Relay, text: str = "my worker crashed") -> None:
    relay.blocked = True
    relay.cut()
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")
    expect(page.locator(".parley-visitor[data-state=queued]")).to_have_count(1)


def session_of(page: Page, stack: Stack) -> str:
    session: str = page.evaluate(SESSION_OF_PAGE, [stack.url, "default"])
    return session


def runs_of(stack: Stack, session: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = stack.http.get("/api/runs", params={"session": session}).json()[
        "runs"
    ]
    return runs


def test_new_conversation_sends_what_was_queued_offline_and_keeps_what_was_refused(
    page: Page, stack: Stack
) -> None:
    page.goto(stack.url)
    connected(page)
    old = session_of(page, stack)
    page.evaluate("window.parley.send('x'.repeat(5000))")  # refused: too long
    failed = page.locator(".parley-visitor[data-state=failed]")
    expect(failed).to_contain_text("Not sent: the message is too long")
    stack.stop_server()
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    queued = page.locator(".parley-visitor").nth(1)
    expect(queued).to_have_attribute("data-state", "queued")

    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".parley-visitor .parley-body")).to_have_count(2)
    expect(queued).to_contain_text("Will be sent when the connection is back.")
    stack.start_server()
    connected(page)
    expect(queued).to_have_attribute("data-state", "sent", timeout=15_000)
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    new = session_of(page, stack)
    assert new != old
    assert [r["session"] for r in runs_of(stack, new)] == [new]  # sent in the new one
    assert runs_of(stack, old) == []
    # the refused one came along, still refused, and its Retry still works
    expect(failed).to_contain_text("Not sent: the message is too long")
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()


def test_new_conversation_sends_what_was_queued_while_the_agent_was_busy(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_DEMO_CHUNK_DELAY="0.05")  # a 120-chunk answer takes ~6 s
    page.goto(stack.url)
    connected(page)
    box = page.get_by_label("Your message")
    box.fill("tell me everything")
    box.press("Enter")
    expect(page.locator(".parley-agent .parley-body")).to_contain_text("step 2 of the")
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.locator(".parley-visitor").nth(1)).to_have_attribute("data-state", "queued")

    page.get_by_role("button", name="New conversation").click()
    connected(page)
    mine = page.locator(".parley-visitor")
    expect(mine.locator(".parley-body")).to_have_text(["my worker crashed"])
    expect(mine).to_have_attribute("data-state", "sent", timeout=15_000)
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)


def test_a_message_queued_in_one_tab_is_sent_when_the_other_tab_starts_a_new_conversation(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_DEMO_CHUNK_DELAY="0.05")
    page.goto(stack.url)
    other = page.context.new_page()
    other.goto(stack.url)
    for tab in (page, other):
        connected(tab)
    box = page.get_by_label("Your message")
    box.fill("tell me everything")
    box.press("Enter")
    expect(other.locator(".parley-agent .parley-body")).to_contain_text("step 2 of the")
    other_box = other.get_by_label("Your message")
    other_box.fill("my worker crashed")
    other_box.press("Enter")
    queued = other.locator(".parley-visitor[data-state=queued]")
    expect(queued).to_contain_text("Will be sent when the agent has finished.")

    page.get_by_role("button", name="New conversation").click()
    connected(other)
    for tab in (other, page):  # sent in the new conversation, which both tabs show
        expect(tab.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
        expect(tab.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    new = session_of(page, stack)
    assert session_of(other, stack) == new
    assert len(runs_of(stack, new)) == 1


def test_a_message_queued_offline_is_sent_after_a_reload(page: Page, stack: Stack) -> None:
    relay = relayed(page, stack)
    session = session_of(page, stack)
    page.evaluate("window.parley.send('x'.repeat(5000))")  # refused: too long
    expect(page.locator(".parley-visitor[data-state=failed]")).to_have_count(1)
    write_offline(page, relay)

    page.reload()  # the socket still down
    visitor = page.locator(".parley-visitor")
    expect(visitor).to_have_count(2)
    expect(visitor.nth(1)).to_contain_text("Will be sent when the connection is back.")
    relay.blocked = False
    connected(page)
    failed = page.locator(".parley-visitor[data-state=failed]")
    expect(failed).to_contain_text("Not sent: the message is too long")
    expect(visitor.nth(1)).to_have_attribute("data-state", "sent", timeout=15_000)
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    assert len(relay.messages("my worker crashed")) == 1
    assert len(runs_of(stack, session)) == 1

    page.reload()  # what was sent is the server's now; the refused one is still kept
    connected(page)
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(
        ["my worker crashed", "x" * 5000]
    )
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()
    assert len(relay.messages("my worker crashed")) == 1


def test_a_message_the_server_took_before_a_reload_is_shown_and_started_once(
    page: Page, stack: Stack
) -> None:
    relay = relayed(page, stack)
    session = session_of(page, stack)
    relay.cut_after_send = "ack"  # the server gets it; the socket drops before its ack
    relay.blocked = True
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()

    page.reload()
    expect(page.locator(".parley-visitor")).to_have_attribute("data-state", "queued")
    relay.blocked = False
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
    expect(page.locator(".parley-visitor")).to_have_attribute("data-state", "sent")
    assert len(relay.messages("my worker crashed")) == 2  # sent again after the reload
    assert len(runs_of(stack, session)) == 1  # and started once
    expect(page.locator(".parley-prompt")).to_have_count(1)


def test_two_tabs_send_a_message_queued_before_a_reload_once(page: Page, stack: Stack) -> None:
    """The tab that wrote it is reloaded while the other tab of the conversation is open:
    both pages find it kept; one of them sends it."""
    relay = relayed(page, stack, every_tab=True)
    write_offline(page, relay)
    other = page.context.new_page()
    other.goto(stack.url)  # finds it kept, by a tab still open: not its own to send
    expect(other.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    expect(other.locator(".parley-visitor")).to_have_count(0)

    page.reload()
    relay.blocked = False
    for tab in (page, other):
        connected(tab)
        expect(tab.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
        expect(tab.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
    assert len(relay.messages("my worker crashed")) == 1
    assert len(runs_of(stack, session_of(page, stack))) == 1
