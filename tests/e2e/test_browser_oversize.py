"""What the visitor writes that is over the server's websocket frame limit, in headless
Chromium against real server and worker processes. The server refuses such a frame
unread (``frame_too_large``), so its error could not say which answer or message it
refused: the card stayed "Sending…" and the message stayed in flight, holding back every
message after it. The page knows the limit from the server's first frame (``ready``):
it does not send what is over it, and says so in plain words (the visitor can shorten it
and send again). A frame the server refuses as too large all the same (a page not told
the limit) has its ``ref`` read from the frame's head and echoed, and settles what it
carried."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from playwright.sync_api import Page, WebSocketRoute, expect

from .hosting import HostSite
from .stack import Stack
from .test_browser_delivery import SOCKET, Relay, pump_until
from .test_browser_unsent import CLOUD, relayed
from .test_browser_ux import agent_page

LONG = 70_000  # characters: its frame is over the server's 64 KiB
ANSWER_TOO_LONG = "Not accepted: that answer is too long — shorten it and send it again"
FRAME_TOO_LONG = "that is too long to send — shorten it and send it again"


def answers(sent: list[dict[str, Any]]) -> list[Any]:
    return [f["payload"] for f in sent if f.get("type") == "answer"]


def ask(page: Page) -> None:
    """Start the widget_continued run: its question takes any text."""
    box = page.get_by_label("Your message")
    box.fill("hi")
    box.press("Enter")
    expect(page.get_by_role("textbox", name="Turn 1: what next?")).to_be_enabled()


def test_an_answer_over_the_frame_limit_is_refused_unsent_and_a_shorter_one_goes(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    relay = Relay()
    page.route_web_socket(SOCKET, relay)
    agent_page(page, site, make_stack, "widget_continued")
    ask(page)
    card = page.locator(".parley-prompt").nth(0)
    field = card.get_by_role("textbox", name="Turn 1: what next?")
    field.fill("x" * LONG)
    card.get_by_role("button", name="Send answer").click()
    expect(card).to_have_attribute("data-state", "pending")
    expect(card).to_contain_text(ANSWER_TOO_LONG)
    expect(field).to_be_enabled()
    expect(field).to_be_focused()
    assert answers(relay.sent) == []  # not sent: the server would have refused it unread
    field.fill("short")
    card.get_by_role("button", name="Send answer").click()
    expect(card).to_have_attribute("data-state", "received")
    expect(card).to_contain_text("You answered: short")
    expect(page.get_by_text("Noted: short")).to_be_visible()
    assert answers(relay.sent) == ["short"]


def test_a_message_over_the_frame_limit_is_refused_unsent_and_the_next_one_goes(
    page: Page, stack: Stack
) -> None:
    relay = relayed(page, stack)
    page.evaluate(f"window.parley.send('x'.repeat({LONG}))")
    long = page.locator(".parley-visitor").nth(0)
    expect(long).to_have_attribute("data-state", "failed")
    expect(long).to_contain_text(f"Not sent: {FRAME_TOO_LONG}")
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.locator(".parley-visitor").nth(1)).to_have_attribute("data-state", "sent")
    expect(page.get_by_role("button", name=CLOUD)).to_be_enabled(timeout=15_000)
    expect(long).to_have_attribute("data-state", "failed")
    assert relay.messages("x" * LONG) == []
    assert len(relay.messages("my worker crashed")) == 1


class Untold:
    """Forwards the page's session websockets, with the server's ``max_frame_bytes`` left
    out of its ``ready`` frame (the page is not told the limit, so it sends what is over
    it), and keeps what the page sent and the server's replies to it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []

    def __call__(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            self.sent.append(orjson.loads(message))
            server.send(message)

        def from_server(message: str | bytes) -> None:
            frame = orjson.loads(message)
            if frame.get("type") == "ready":
                del frame["limits"]["max_frame_bytes"]
                message = orjson.dumps(frame).decode()
            elif frame.get("type") in ("ack", "error") and "id" not in frame:
                self.replies.append(frame)
            ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    def refused(self, kind: str) -> list[dict[str, Any]]:
        """The server's frame_too_large errors, each with the frame of ``kind`` it names."""
        sent = {f["ref"]: f for f in self.sent if f.get("type") == kind}
        return [
            r for r in self.replies if r.get("error") == "frame_too_large" and r.get("ref") in sent
        ]


def test_a_frame_the_server_refuses_as_too_large_settles_what_it_carried(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    relay = Untold()
    page.route_web_socket(SOCKET, relay)
    agent_page(page, site, make_stack, "widget_continued")
    page.evaluate(f"window.parley.send('x'.repeat({LONG}))")
    pump_until(page, lambda: bool(relay.refused("message")), "the message refused, by its ref")
    long = page.locator(".parley-visitor").nth(0)
    expect(long).to_have_attribute("data-state", "failed")
    expect(long).to_contain_text(f"Not sent: {FRAME_TOO_LONG}")
    ask(page)  # the next message goes: the refused one holds nothing back
    card = page.locator(".parley-prompt").nth(0)
    field = card.get_by_role("textbox", name="Turn 1: what next?")
    field.fill("x" * LONG)
    card.get_by_role("button", name="Send answer").click()
    pump_until(page, lambda: bool(relay.refused("answer")), "the answer refused, by its ref")
    expect(card).to_have_attribute("data-state", "pending")
    expect(card).to_contain_text(f"Not accepted: {FRAME_TOO_LONG}")
    field.fill("short")
    card.get_by_role("button", name="Send answer").click()
    expect(card).to_have_attribute("data-state", "received")
    expect(page.get_by_text("Noted: short")).to_be_visible()
    assert len(answers(relay.sent)) == 2  # the long one once, not sent again
