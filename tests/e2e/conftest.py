"""Browser fixtures: Debian's Chromium driven by Playwright, and a fresh real stack."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .hosting import HostSite
from .stack import Stack

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"

pytestmark = pytest.mark.e2e

# Without Chromium the browser tests fail (they never silently vanish); a machine that
# cannot have it may skip them, visibly, with PARLEY_ALLOW_NO_BROWSER=1.
ALLOW_NO_BROWSER = os.environ.get("PARLEY_ALLOW_NO_BROWSER") == "1"


# Module scope, not session: sync Playwright runs an event loop in this thread while it
# is open, which would break every asyncio test collected after the browser tests.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not os.path.exists(CHROMIUM):
        missing = f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
        if ALLOW_NO_BROWSER:
            pytest.skip(f"{missing}; skipped because PARLEY_ALLOW_NO_BROWSER=1")
        pytest.fail(f"{missing}; set PARLEY_ALLOW_NO_BROWSER=1 to skip the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    from playwright.sync_api import Browser

    assert isinstance(browser, Browser)
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def make_stack(redis_url: str) -> Iterator[Callable[..., Stack]]:
    stacks: list[Stack] = []

    def make(apps: tuple[str, ...] = (), **env: str) -> Stack:
        stack = Stack(redis_url, env, apps)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()


@pytest.fixture
def site() -> Iterator[HostSite]:
    """The host site: a page on its own origin embedding the widget (``site.pages``)."""
    host = HostSite({})
    yield host
    host.close()


# The widget's session on a page, as the page stores it (localStorage, per server origin and
# agent); evaluated in the page with [server url, agent].
SESSION_OF_PAGE = """([server, agent]) => {
  const key = `parley:v1:${new URL(server).origin}:${agent}`;
  return JSON.parse(localStorage.getItem(key)).session;
}"""


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack()


def screenshot(page: object, name: str) -> Path:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path
