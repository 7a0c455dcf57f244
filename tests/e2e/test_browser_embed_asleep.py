"""The visitor's laptop sleeps, or the network goes away under a phone: the widget's
websocket is silently dead (no close, no error: its bytes go nowhere). The widget must
notice, say so, reconnect, and deliver what was typed meanwhile exactly once."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import orjson
from playwright.sync_api import Page, expect

from .conftest import SESSION_OF_PAGE
from .hosting import HostSite, embed_page
from .stack import Stack


class Blackhole:
    """A TCP proxy to the Parley server that can go silent: ``freeze()`` makes every open
    connection swallow its bytes both ways, for ever, without closing (a NAT mapping lost
    while the laptop slept), and connections made while frozen get nowhere; after
    ``thaw()`` new connections go through again."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.frozen = False
        self.lock = threading.Lock()
        self.pairs: list[dict[str, object]] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        with self.lock:
            self.frozen = True
            for pair in self.pairs:
                pair["dead"] = True

    def thaw(self) -> None:
        with self.lock:
            self.frozen = False

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                dead = self.frozen
            try:
                upstream = None if dead else socket.create_connection(self.target)
            except OSError:  # the server is gone (the test's teardown): as a refused line
                client.close()
                continue
            pair: dict[str, object] = {"dead": dead}
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._relay, args=(client, upstream, pair), daemon=True).start()

    def _relay(
        self, client: socket.socket, upstream: socket.socket | None, pair: dict[str, object]
    ) -> None:
        ends = [client] + ([upstream] if upstream else [])
        try:
            while not self.closed:
                readable, _, _ = select.select(ends, [], [], 0.2)
                for end in readable:
                    data = end.recv(65536)
                    if not data:
                        if not pair["dead"]:
                            return
                        ends.remove(end)  # a dead line hears no close either
                        continue
                    if pair["dead"] or upstream is None:
                        continue  # swallowed
                    (upstream if end is client else client).sendall(data)
        except OSError:
            return
        finally:
            for end in (client, upstream):
                if end is not None:
                    with contextlib.suppress(OSError):
                        end.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()


@contextlib.contextmanager
def blackhole(target: str) -> Iterator[Blackhole]:
    proxy = Blackhole(target)
    try:
        yield proxy
    finally:
        proxy.close()


def visitor_messages(stack: Stack, session: str) -> list[str]:
    client = stack.redis()
    try:
        keys = list(client.scan_iter(match=f"parley:*session:{session}:outbox"))
        entries = [orjson.loads(f[b"m"]) for k in keys for _, f in client.xrange(k)]
    finally:
        client.close()
    return [m["text"] for m in entries if m.get("type") == "visitor"]


def test_a_silently_dead_socket_is_noticed_and_what_was_typed_is_sent_once(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    with blackhole(stack.url) as line:
        site.pages["/"] = embed_page(
            line.url, attrs='data-target="#chat"', body='<div id="chat"></div>'
        )
        page.goto(site.url())
        status = page.locator(".parley-connection")
        expect(status).to_have_text("Connected")
        session = page.evaluate(SESSION_OF_PAGE, [line.url, "default"])

        line.freeze()  # the laptop sleeps: the socket stays "open", its bytes go nowhere
        box = page.get_by_label("Your message")
        box.fill("my worker crashed")
        box.press("Enter")
        # The message got no answer from the server: the widget says the line is down
        # (it does not keep saying "Connected" with the message "Sending…" for ever).
        expect(status).to_have_text("Connection lost — reconnecting…", timeout=15_000)
        expect(page.locator(".parley-visitor")).to_have_count(1)

        line.thaw()  # back: a new socket, and the message goes, once
        expect(status).to_have_text("Connected", timeout=15_000)
        expect(page.get_by_text("Which product are you using?")).to_be_visible(timeout=15_000)
        expect(page.locator(".parley-visitor")).to_have_count(1)
        assert visitor_messages(stack, session) == ["my worker crashed"]
        runs = stack.http.get("/api/runs", params={"session": session}).json()["runs"]
        assert len(runs) == 1, runs

        # Idle this time, and the browser says it went offline: the widget says so at once
        # (not "Connected"), and finds its dead socket without a message to send.
        line.freeze()
        page.context.set_offline(True)
        expect(status).to_have_text("Offline — messages will be sent when you are back")
        page.context.set_offline(False)
        expect(status).to_have_text("Connection lost — reconnecting…", timeout=15_000)
        line.thaw()
        expect(status).to_have_text("Connected", timeout=15_000)
        page.get_by_role("button", name="Parley Cloud").click()
        expect(page.get_by_text("Thanks! For Parley Cloud")).to_be_visible()
