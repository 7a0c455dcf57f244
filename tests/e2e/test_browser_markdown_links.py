"""The agent's markdown images and links, in a real headless Chromium: an image is a link
to it named by its alt text (no picture loads), a relative link goes where it would on
the page the chat is on, and a link of any other scheme (however it is cased or spaced)
is plain text."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.e2e.hosting import HostSite
from tests.e2e.stack import Stack
from tests.e2e.test_browser_ux import agent_page, say


def test_images_are_links_relative_links_resolve_and_other_schemes_are_text(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    agent_page(page, site, make_stack, "widget_links")
    say(page, "show me")
    agent = page.locator(".parley-agent").first
    expect(agent).to_contain_text("a cat and https://example.org/no-alt.png")
    links = agent.get_by_role("link")
    expect(links).to_have_text(
        ["a cat", "https://example.org/no-alt.png", "the docs", "elsewhere", "mail"]
    )
    hrefs = [links.nth(i).get_attribute("href") for i in range(5)]
    assert hrefs == [
        "https://example.org/cat.png",
        "https://example.org/no-alt.png",
        f"{site.origin}/docs/page",
        "http://example.net/x",  # (the host page's scheme)
        "mailto:help@example.org",
    ]
    for i in range(5):
        expect(links.nth(i)).to_have_attribute("rel", "noopener noreferrer nofollow")
    for text in ("upper", "spaced", "bad"):
        expect(agent).to_contain_text(text)
    counts = page.evaluate(
        """() => {
          const root = document.querySelector(".parley-host").shadowRoot;
          return { img: root.querySelectorAll("img").length, xss: window.__xss ?? null };
        }"""
    )
    assert counts == {"img": 0, "xss": None}
