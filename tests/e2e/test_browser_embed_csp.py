"""The widget on a page with a strict Content-Security-Policy: no 'unsafe-inline', no
'unsafe-eval', only the widget's origin added to script-src, style-src and connect-src (as
the README says). It loads, connects and holds a whole conversation, with no violation."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .hosting import HostSite
from .stack import Stack

VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def test_a_strict_content_security_policy_needs_only_the_widgets_origin(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    socket = stack.url.replace("http://", "ws://")  # Chromium wants it named (wss:// in production)
    policy = (
        f"default-src 'none'; script-src 'self' {stack.url}; style-src 'self' {stack.url}; "
        f"connect-src 'self' {stack.url} {socket}; img-src 'self'"
    )
    site.pages["/"] = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Shop</title>
<meta http-equiv="Content-Security-Policy" content="{policy}"></head>
<body><div id="chat"></div>
<script type="module" src="{stack.url}/widget/parley-widget.js" data-target="#chat"></script>
</body></html>"""
    page.add_init_script(VIOLATIONS)
    page.goto(site.url())
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    page.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Thanks! For Parley Cloud")).to_be_visible()
    # its stylesheet applied (a blocked one would leave the send button square)
    send = page.locator(".parley-send")
    assert send.evaluate("b => getComputedStyle(b).borderRadius") == "999px"
    assert page.evaluate("window.cspViolations") == []
