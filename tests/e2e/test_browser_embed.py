"""The widget embedded in a page of another origin (two ports), as a site owner pastes it:
CORS and the websocket's Origin check by one allow-list, style isolation, the launcher
with its unread count, the JS API, another language."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from playwright.sync_api import Page, expect

from .conftest import screenshot
from .hosting import HostSite, embed_page
from .stack import Stack

FINAL = "your runs will resume where they stopped."
RECORD_EVENTS = """
window.parleyEvents = [];
for (const name of ["ready", "open", "close", "message", "prompt", "unread"]) {
  document.addEventListener(`parley:${name}`, (e) => window.parleyEvents.push(name));
}
"""


def session_keys(stack: Stack) -> int:
    client = stack.redis()
    try:
        return sum(1 for _ in client.scan_iter(match="parley:*session:*"))
    finally:
        client.close()


def test_a_whole_conversation_on_another_origin(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=f"https://other.example, {site.origin}")
    site.pages["/"] = embed_page(stack.url, attrs='data-title="Shop support"')
    cors: dict[str, str | None] = {}
    page.on(
        "response",
        lambda r: (
            cors.update({r.url: r.headers.get("access-control-allow-origin")})
            if r.url.startswith(stack.url)
            else None
        ),
    )
    page.add_init_script(RECORD_EVENTS)
    page.goto(site.url())
    launcher = page.get_by_role("button", name="Open chat")
    launcher.click()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    box = page.get_by_label("Your message")
    expect(box).to_be_focused()
    box.fill("my worker crashed")
    box.press("Enter")
    choices = page.get_by_role("group", name="Which product are you using?")
    choices.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Thanks! For Parley Cloud")).to_contain_text(FINAL)
    screenshot(page, "embed-1-conversation")
    # Every file and the session came cross-origin, allowed for this origin only.
    assert cors[f"{stack.url}/widget/parley-widget.js"] == site.origin
    assert cors[f"{stack.url}/widget/vendor/marked.esm.js"] == site.origin
    assert cors[f"{stack.url}/api/sessions"] == site.origin
    # The host page's rules (serif, dark red, `all: unset` on p/div/button) stay outside.
    send = page.locator(".parley-send")
    assert send.evaluate("b => getComputedStyle(b).fontFamily") != "serif"
    assert send.evaluate("b => getComputedStyle(b).borderRadius") == "999px"
    assert page.locator(".parley-agent").first.evaluate("d => getComputedStyle(d).padding") != "0px"

    # Closed, the launcher counts what arrives: the next prompt, answered elsewhere.
    box.fill("please email me")
    box.press("Enter")
    expect(page.get_by_text("Which email address should we use to reach you?")).to_be_visible()
    page.evaluate("window.parley.close()")
    expect(page.get_by_role("region", name="Shop support chat")).to_be_hidden()
    expect(launcher).to_be_focused()
    [hook] = stack.pending_hooks()
    stack.http.post(f"/api/hooks/{hook['token']}", json={"payload": "ada@example.org"})
    expect(launcher).to_have_accessible_name("Open chat (1 unread)")
    expect(page.locator(".parley-badge")).to_have_text("1")
    screenshot(page, "embed-2-unread")
    launcher.press("Enter")
    expect(page.get_by_text("Thanks! For ada@example.org")).to_be_visible()
    expect(page.locator(".parley-badge")).to_be_hidden()
    page.keyboard.press("Escape")
    expect(page.get_by_role("region", name="Shop support chat")).to_be_hidden()
    events = page.evaluate("window.parleyEvents")
    assert events[0] == "ready"
    for name in ("open", "message", "prompt", "unread", "close"):
        assert name in events, events


def test_a_page_of_an_origin_not_allowed_is_refused(
    page: Page, site: HostSite, stack: Stack
) -> None:
    site.pages["/"] = embed_page(
        stack.url, attrs='data-target="#chat"', body='<div id="chat"></div>'
    )
    messages: list[str] = []
    page.on("console", lambda m: messages.append(m.text))
    session = httpx.post(stack.url + "/api/sessions").json()["session_id"]  # no Origin: a backend
    before = session_keys(stack)
    page.goto(site.url())  # "load" waits for the module script, which the browser blocks
    expect(page.locator(".parley-host")).to_have_count(0)
    assert any("CORS" in m for m in messages), messages
    refused = page.evaluate(
        """async ([server, session]) => {
          let fetched = "allowed";
          try { await fetch(server + "/api/sessions", { method: "POST" }); }
          catch (err) { fetched = String(err); }
          const ws = await new Promise((resolve) => {
            const frames = [];
            const url = `${server.replace("http", "ws")}/ws/sessions/${session}?after=0-0`;
            const socket = new WebSocket(url);
            socket.onmessage = (e) => frames.push(JSON.parse(e.data));
            socket.onclose = (e) => resolve({ code: e.code, frames });
          });
          return { fetched, ws };
        }""",
        [stack.url, session],
    )
    assert "Failed to fetch" in refused["fetched"]
    assert refused["ws"]["code"] == 4403
    assert [f["error"] for f in refused["ws"]["frames"]] == ["origin_not_allowed"]
    assert session_keys(stack) == before  # the refused POST created no session


def test_another_language_and_the_host_pages_own_wording(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    strings = '{"send": "Go"}'
    site.pages["/"] = embed_page(
        stack.url,
        attrs=f'data-target="#chat" data-lang="fr" data-strings=\'{strings}\'',
        body='<div id="chat"></div>',
    )
    page.goto(site.url())
    expect(page.get_by_role("status").filter(has_text="Connecté")).to_be_visible()
    box = page.get_by_label("Votre message")
    expect(page.get_by_role("button", name="Go")).to_be_visible()
    expect(page.get_by_role("button", name="Nouvelle conversation")).to_be_visible()
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.get_by_text("attend votre réponse.")).to_be_visible()
    page.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Vous avez répondu : Parley Cloud")).to_be_visible()
    screenshot(page, "embed-3-french")
