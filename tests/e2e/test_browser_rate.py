"""A burst of chat messages over the server's rates, in headless Chromium against real
server and worker processes: the chat messages a client may start (``PARLEY_MESSAGE_RATE``,
refused ``rate_limited`` with the message's ref and a ``retry_after``) and the frames one
websocket may carry (``ws_rate``/``ws_burst``, refused unread, the ref read from the frame's
head). A message refused for rate is queued and sent again by itself: every message of the
burst arrives, exactly once and in order, and none stays "Sending…"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, expect

from .stack import Stack
from .test_browser_delivery import SOCKET, Relay, connected
from .test_browser_unsent import runs_of, session_of

BURST = [f"tell me everything, part {n}" for n in range(1, 5)]  # each a long answer, no question


def refused_for_rate(relay: Relay) -> list[dict[str, Any]]:
    """The page's messages the server refused for rate, by the ref its error echoes."""
    messages = {f["ref"]: f for f in relay.sent if f.get("type") == "message"}
    return [
        messages[r["ref"]]
        for r in relay.replies
        if r.get("error") == "rate_limited" and r.get("ref") in messages
    ]


def burst_arrives_once_in_order(page: Page, stack: Stack, relay: Relay) -> None:
    page.route_web_socket(SOCKET, relay)
    page.goto(stack.url)
    connected(page)
    session = session_of(page, stack)
    box = page.get_by_label("Your message")
    for text in BURST:
        box.fill(text)
        box.press("Enter")
    visitor = page.locator(".parley-visitor")
    expect(visitor.locator(".parley-body")).to_have_text(BURST)
    for n in range(len(BURST)):
        expect(visitor.nth(n)).to_have_attribute("data-state", "sent", timeout=60_000)
    expect(page.locator(".parley-agent")).to_have_count(len(BURST), timeout=30_000)
    expect(page.get_by_text("Sending…")).to_have_count(0)
    assert refused_for_rate(relay), "no message was refused for rate: the test proves nothing"
    # each started one run, once
    runs = runs_of(stack, session)
    assert len(runs) == len(BURST), runs
    acked = {r["ref"] for r in relay.replies if r.get("type") == "ack"}
    for text in BURST:
        assert len([f for f in relay.messages(text) if f["ref"] in acked]) == 1, text
    # and the conversation the server keeps has each once, in order
    page.reload()
    connected(page)
    expect(visitor.locator(".parley-body")).to_have_text(BURST)
    expect(page.locator(".parley-agent")).to_have_count(len(BURST))


def test_a_burst_over_the_message_rate_arrives_once_in_order(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_MESSAGE_RATE="2/6 seconds")
    burst_arrives_once_in_order(page, stack, Relay())


def test_a_burst_over_the_frame_rate_arrives_once_in_order(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_WS_RATE="0.25", PARLEY_WS_BURST="1")
    relay = Relay()
    burst_arrives_once_in_order(page, stack, relay)
    frame_rate = [r for r in relay.replies if r.get("error") == "rate_limited"]
    assert any("frames per second" in r["message"] for r in frame_rate), frame_rate


def test_a_message_over_the_message_rate_waits_until_the_server_takes_it(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    """Not sent again every 2 s while the server still refuses it: after the wait its
    refusal says (``retry_after``). Each refusal counts toward the 50 rejected frames in a
    row after which the server closes the socket (1008): a rate of a few an hour had the
    page's socket closed, and the visitor told the connection was lost, every 100 s."""
    stack = make_stack(PARLEY_MESSAGE_RATE="1/12 seconds")
    relay = Relay()
    page.route_web_socket(SOCKET, relay)
    page.goto(stack.url)
    connected(page)
    box = page.get_by_label("Your message")
    for text in BURST[:2]:
        box.fill(text)
        box.press("Enter")
    second = page.locator(".parley-visitor").nth(1)
    expect(second).to_have_attribute("data-state", "sent", timeout=30_000)
    refusals = [f["text"] for f in refused_for_rate(relay)]
    assert refusals and set(refusals) == {BURST[1]}, refusals
    assert len(refusals) <= 2, f"sent again {len(refusals)} times while refused for rate"
    assert len(relay.messages(BURST[1])) == len(refusals) + 1
