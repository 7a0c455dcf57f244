"""A message the visitor sends just before "New conversation" starts one run, in one
conversation: the old conversation's socket may have taken it (its ack on the way, or the
socket dropped before the ack came), so it is that conversation's, settled there (sent
again on a socket of its own, with its client id: the server starts it once) and not
carried into the new one, where it would start a second run. In headless Chromium against
real server and worker processes; the socket is cut with Playwright's websocket routing."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.processes import wait_until

from .stack import Stack
from .test_browser_delivery import SOCKET, Relay, connected
from .test_browser_unsent import CLOUD, runs_of, session_of

TEXT = "my worker crashed"


def session_now(page: Page, stack: Stack) -> str | None:
    """The page's conversation, None while it creates one."""
    found = page.evaluate(
        "key => JSON.parse(localStorage.getItem(key) || 'null')?.session ?? null",
        f"parley:v1:{stack.url}:default",
    )
    return found if isinstance(found, str) else None


def sent_and_ack_lost(page: Page, stack: Stack) -> tuple[Relay, str]:
    """The page's message taken by its conversation's server, the socket dropped before
    the ack and kept down: (the relay, that conversation)."""
    relay = Relay()
    page.context.route_web_socket(SOCKET, relay)
    page.goto(stack.url)
    connected(page)
    old = session_of(page, stack)
    relay.cut_after_send = "ack"  # the server takes it; the socket drops before its ack
    relay.blocked = True  # and stays down
    box = page.get_by_label("Your message")
    box.fill(TEXT)
    box.press("Enter")
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    wait_until(lambda: len(runs_of(stack, old)) == 1, 15, "the old conversation's run")
    return relay, old


def test_a_message_sent_just_before_new_conversation_starts_one_run(
    page: Page, stack: Stack
) -> None:
    """The old conversation took it (its ack was on the way when the visitor left): it is
    that conversation's, not started again in the new one, nor shown there."""
    page.goto(stack.url)
    connected(page)
    old = session_of(page, stack)
    # The send and the press in one go: the message's frame leaves on the old socket, the
    # press comes before its ack (as a visitor who presses Enter, then New conversation).
    page.evaluate("text => { window.parley.send(text); window.parley.newConversation(); }", TEXT)
    connected(page)
    new = session_of(page, stack)
    assert new != old
    wait_until(lambda: len(runs_of(stack, old)) == 1, 15, "the old conversation's run")
    page.wait_for_timeout(3_000)  # time for a second run to start, if any would
    assert runs_of(stack, new) == []  # not started a second time in the new one
    assert len(runs_of(stack, old)) == 1
    expect(page.locator(".parley-visitor")).to_have_count(0)  # nor shown in it
    # the new conversation works as any other
    box = page.get_by_label("Your message")
    box.fill("please email me")
    box.press("Enter")
    expect(page.locator(".parley-visitor")).to_have_attribute("data-state", "sent")
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(["please email me"])
    wait_until(lambda: len(runs_of(stack, new)) == 1, 15, "the new conversation's run")
    assert len(runs_of(stack, old)) == 1


def test_a_message_whose_ack_was_lost_before_new_conversation_starts_one_run(
    page: Page, stack: Stack
) -> None:
    relay, old = sent_and_ack_lost(page, stack)
    box = page.get_by_label("Your message")

    page.get_by_role("button", name="New conversation").click()
    relay.blocked = False
    connected(page)
    new = session_of(page, stack)
    assert new != old
    page.wait_for_timeout(3_000)  # time for a second run to start, if any would
    assert runs_of(stack, new) == []
    assert len(runs_of(stack, old)) == 1
    expect(page.locator(".parley-visitor")).to_have_count(0)
    assert len(relay.messages(TEXT)) == 2  # sent again in the old one, which had it
    # the new conversation works as any other
    box.fill("please email me")
    box.press("Enter")
    expect(page.get_by_role("button", name=CLOUD)).to_have_count(0)
    wait_until(lambda: len(runs_of(stack, new)) == 1, 15, "the new conversation's run")
    assert len(runs_of(stack, old)) == 1


def test_a_message_the_old_conversation_may_have_started_is_settled_there_after_a_reload(
    page: Page, stack: Stack
) -> None:
    """The page is reloaded before it could settle the message (the socket still down):
    what it kept says which conversation may have started it, and the reloaded page
    settles it there, not in the conversation it now shows."""
    relay, old = sent_and_ack_lost(page, stack)
    page.get_by_role("button", name="New conversation").click()
    wait_until(lambda: session_now(page, stack) not in (None, old), 15, "the new conversation")
    new = session_of(page, stack)

    page.reload()  # the socket still down
    relay.blocked = False
    connected(page)
    assert session_of(page, stack) == new
    wait_until(lambda: len(relay.messages(TEXT)) == 2, 15, "the message settled")
    page.wait_for_timeout(3_000)  # time for a second run to start, if any would
    assert runs_of(stack, new) == []
    assert len(runs_of(stack, old)) == 1
    expect(page.locator(".parley-visitor")).to_have_count(0)
    kept = page.evaluate("Object.keys(localStorage).filter(k => k.includes(':unsent:'))")
    assert kept == [], kept  # settled: nothing more to send
