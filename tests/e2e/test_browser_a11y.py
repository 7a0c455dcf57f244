"""axe-core on the demo pages (and the launcher on a host page), in light and dark mode,
at 375 px and at desktop width, with a conversation and a pending prompt on screen: no
serious or critical violation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from .conftest import screenshot
from .hosting import HostSite, embed_page
from .stack import Stack

AXE = Axe()
SIZES = {"mobile": {"width": 375, "height": 740}, "desktop": {"width": 1280, "height": 800}}


def serious(page: Page) -> list[dict[str, Any]]:
    results = AXE.run(page)
    violations: list[dict[str, Any]] = results.response["violations"]
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


def check_every_mode(page: Page, name: str) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        for size, viewport in SIZES.items():
            page.set_viewport_size(viewport)  # type: ignore[arg-type]
            problems = serious(page)
            if problems:
                found[f"{scheme}/{size}"] = problems
            screenshot(page, f"a11y-{name}-{scheme}-{size}")
    assert not found, found


@pytest.mark.parametrize(
    ("path", "message", "prompt"),
    [
        ("/", "please email me", "Which email address should we use to reach you?"),
        ("/langchain", "where is my order 1234?", "Refund or reship?"),
    ],
)
def test_demo_pages(page: Page, stack: Stack, path: str, message: str, prompt: str) -> None:
    page.goto(stack.url + path)
    box = page.get_by_label("Your message")
    box.fill(message)
    box.press("Enter")
    expect(page.get_by_role("group", name=prompt)).to_be_visible()
    check_every_mode(page, path.strip("/") or "support")


def test_the_launcher_on_a_host_page(page: Page, make_stack: Callable[..., Stack]) -> None:
    site = HostSite({})
    try:
        stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
        site.pages["/"] = embed_page(stack.url, attrs='data-title="Shop support" data-open="true"')
        page.goto(site.url())
        box = page.get_by_label("Your message")
        box.fill("my worker crashed")
        box.press("Enter")
        page.get_by_role("button", name="Parley Cloud").click()
        expect(page.get_by_text("You answered: Parley Cloud")).to_be_visible()
        check_every_mode(page, "launcher")
    finally:
        site.close()
