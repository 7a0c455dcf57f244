"""Sending under adverse conditions, in headless Chromium against real server and worker
processes: the socket drops while a message is in flight (it is sent again once the socket
is back, and shown and started once), and a message sent while another tab's run is going
is refused as busy, queued and sent by itself when the agent is free; an answer in flight
is settled by the replay once the socket is back.

The socket is cut with Playwright's websocket routing: the page's websocket goes through a
relay in the test that forwards both ways until the test cuts it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
from playwright.sync_api import Page, WebSocketRoute, expect

from .conftest import screenshot
from .stack import Stack

SOCKET = re.compile(r"/ws/sessions/")


class Relay:
    """Forwards the page's session websockets to the server, and can cut them:

    - ``cut_after_send`` (``"ack"``): once the page sends a chat message (or a frame of
      type ``cut_type``), the server gets
      it but nothing more reaches the page; when the server acks it, the socket drops;
      (``"frame"``): the message is dropped on the way and the socket drops;
    - ``blocked``: new sockets are refused (the page keeps reconnecting); ``cut()`` drops
      the open ones;
    - ``hold``: the server's session frames (not the replies to the page's own frames)
      are kept back, as for a tab that lags behind; ``release()`` delivers them.
    """

    def __init__(self) -> None:
        self.cut_after_send: str | None = None
        self.cut_type = "message"
        self.blocked = False
        self.hold = False
        self.held: list[tuple[WebSocketRoute, str | bytes]] = []
        self.sent: list[dict[str, Any]] = []  # the page's frames, as the server got them
        self.replies: list[dict[str, Any]] = []  # the server's replies to them
        self.open: list[tuple[WebSocketRoute, WebSocketRoute]] = []

    def __call__(self, ws: WebSocketRoute) -> None:
        if self.blocked:
            ws.close()
            return
        server = ws.connect_to_server()
        self.open.append((ws, server))
        state = {"cut": False, "waiting_ack": None}

        def from_page(message: str | bytes) -> None:
            frame = orjson.loads(message)
            if frame.get("type") == self.cut_type and self.cut_after_send:
                mode, self.cut_after_send = self.cut_after_send, None
                if mode == "frame":
                    state["cut"] = True
                    ws.close()
                    server.close()
                    return
                state["waiting_ack"] = frame["ref"]
            self.sent.append(frame)
            server.send(message)

        def from_server(message: str | bytes) -> None:
            if state["cut"]:
                return
            if state["waiting_ack"] is not None:
                if orjson.loads(message).get("ref") == state["waiting_ack"]:
                    state["cut"] = True  # the server handled it; the page never knows
                    ws.close()
                    server.close()
                return
            frame = orjson.loads(message)
            if "ref" in frame:
                self.replies.append(frame)
            elif self.hold:
                self.held.append((ws, message))
                return
            ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    def cut(self) -> None:
        open_, self.open = self.open, []
        for ws, server in open_:
            ws.close()
            server.close()

    def release(self) -> None:
        self.hold = False
        held, self.held = self.held, []
        for ws, message in held:
            ws.send(message)

    def messages(self, text: str) -> list[dict[str, Any]]:
        return [f for f in self.sent if f.get("type") == "message" and f.get("text") == text]


def pump_until(page: Page, condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    """Wait for a condition on the relay (its handlers run while Playwright waits)."""
    for _ in range(int(timeout * 20)):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def connected(page: Page) -> None:
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()


def test_a_message_in_flight_when_the_socket_drops_is_sent_again_and_shown_once(
    page: Page, stack: Stack
) -> None:
    relay = Relay()
    page.route_web_socket(SOCKET, relay)
    page.goto(stack.url)
    connected(page)
    box = page.get_by_label("Your message")
    visitor = page.locator(".parley-visitor")

    # 1. The server gets the message, the socket drops before its ack.
    relay.cut_after_send = "ack"
    relay.blocked = True  # and stays down for a moment
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    expect(visitor).to_have_attribute("data-state", "queued")
    expect(visitor.locator(".parley-note")).to_have_text(
        "Will be sent when the connection is back."
    )
    screenshot(page, "delivery-1-dropped")
    relay.blocked = False
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_enabled(timeout=15_000)
    expect(visitor).to_have_count(1)
    expect(visitor).to_have_attribute("data-state", "sent")
    expect(visitor.locator(".parley-note")).to_have_text("")
    assert len(relay.messages("my worker crashed")) == 2  # sent again, once
    page.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Thanks! For Parley Cloud")).to_be_visible()
    expect(page.locator(".parley-widget")).to_have_attribute("data-state", "idle")

    # 2. The message is lost on the way; the socket drops.
    relay.cut_after_send = "frame"
    box.fill("please email me")
    box.press("Enter")
    prompt = page.get_by_role("textbox", name="Which email address should we use to reach you?")
    expect(prompt).to_be_visible(timeout=15_000)
    expect(visitor).to_have_count(2)
    expect(visitor.nth(1)).to_have_attribute("data-state", "sent")
    assert len(relay.messages("please email me")) == 1  # the lost one never reached it

    # The server has each message once, one prompt each: a fresh page replays them.
    page.reload()
    connected(page)
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(
        ["my worker crashed", "please email me"]
    )
    expect(page.locator(".parley-prompt")).to_have_count(2)
    expect(page.get_by_text("Let me look that up for you.")).to_have_count(2)


def test_a_message_refused_as_busy_by_another_tabs_run_is_queued_and_sent_when_it_ends(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_DEMO_CHUNK_DELAY="0.05")  # a 120-chunk answer takes ~6 s
    page.goto(stack.url)
    other = page.context.new_page()  # the second tab of the same conversation
    relay = Relay()
    other.route_web_socket(SOCKET, relay)
    other.goto(stack.url)
    for tab in (page, other):
        connected(tab)
    relay.hold = True  # the second tab lags behind: it does not know the agent is busy
    box = page.get_by_label("Your message")
    box.fill("tell me everything")
    box.press("Enter")
    expect(page.locator(".parley-visitor")).to_have_attribute("data-state", "sent")
    expect(page.locator(".parley-agent .parley-body")).to_contain_text("step 3 of the")

    other_box = other.get_by_label("Your message")
    other_box.fill("my worker crashed")
    other_box.press("Enter")
    mine = other.locator(".parley-visitor")
    pump_until(other, lambda: any(r.get("error") == "busy" for r in relay.replies), "busy")
    expect(mine).to_have_attribute("data-state", "queued")
    expect(mine.locator(".parley-note")).to_have_text("Will be sent when the agent has finished.")
    screenshot(other, "delivery-2-busy")
    # Sent by itself once the first tab's answer is done: the prompt of its own run comes.
    expect(page.get_by_text("That is all.")).to_be_visible(timeout=20_000)
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_enabled(timeout=15_000)
    expect(mine).to_have_attribute("data-state", "sent")
    busy = [r for r in relay.replies if r.get("error") == "busy"]
    acks = [r for r in relay.replies if r.get("type") == "ack" and r.get("for") == "message"]
    assert len(busy) >= 1 and len(acks) == 1
    relay.release()
    for tab in (page, other):
        expect(tab.locator(".parley-visitor .parley-body")).to_have_count(2)
        expect(tab.get_by_role("button", name="Parley Cloud")).to_be_enabled()
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(
        ["tell me everything", "my worker crashed"]
    )
    other.reload()
    connected(other)
    expect(other.locator(".parley-visitor .parley-body")).to_have_text(
        ["tell me everything", "my worker crashed"]
    )


def test_an_answer_in_flight_when_the_socket_drops_is_settled_by_the_replay(
    page: Page, stack: Stack
) -> None:
    relay = Relay()
    page.route_web_socket(SOCKET, relay)
    page.goto(stack.url)
    connected(page)
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    card = page.locator(".parley-prompt")
    expect(card.get_by_role("button", name="Parley Cloud")).to_be_enabled()
    # The server records the answer; the socket drops before its ack, and stays down.
    relay.cut_type, relay.cut_after_send, relay.blocked = "answer", "ack", True
    card.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    expect(card).to_have_attribute("data-state", "pending")  # not "Sending…" for ever
    expect(card).to_contain_text("Not connected — try again in a moment.")
    relay.blocked = False
    # back: the replay says it was answered (once), and the run goes on
    expect(card).to_have_attribute("data-state", "received", timeout=15_000)
    expect(card).to_contain_text("You answered: Parley Cloud")
    expect(page.get_by_text("Thanks! For Parley Cloud")).to_be_visible()
    assert len([f for f in relay.sent if f.get("type") == "answer"]) == 1
