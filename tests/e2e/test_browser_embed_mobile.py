"""The launcher on a phone (375 x 667, touch): the open chat fills the screen, and every
control of it can be tapped — nothing of the widget's own lies on top of the composer."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Browser, expect

from .hosting import HostSite, embed_page
from .stack import Stack

# What a tap at the middle of each of the chat's controls lands on (the shadow root's
# hit test, as a finger's).
TAPPED = """() => {
  const shadow = document.querySelector("parley-chat").shadowRoot;
  const hits = {};
  for (const cls of ["parley-input", "parley-send", "parley-new", "parley-close"]) {
    const r = shadow.querySelector("." + cls).getBoundingClientRect();
    const at = shadow.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    const control = at && at.closest("input, button");
    hits[cls] = control ? control.className : null;
  }
  return hits;
}"""


def test_on_a_phone_the_open_chat_can_be_tapped_everywhere(
    browser: Browser, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    site.pages["/"] = embed_page(stack.url, attrs='data-title="Shop support"').replace(
        "<head>", '<head><meta name="viewport" content="width=device-width, initial-scale=1">'
    )
    context = browser.new_context(
        viewport={"width": 375, "height": 667}, has_touch=True, is_mobile=True
    )
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        page.goto(site.url())
        page.get_by_role("button", name="Open chat").tap()
        expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
        panel = page.get_by_role("region", name="Shop support chat")
        box = panel.bounding_box()
        assert box == {"x": 0, "y": 0, "width": 375, "height": 667}, box  # the whole screen
        # The launcher bubble (bottom right, on top of everything) sat over the Send button.
        hits = page.evaluate(TAPPED)
        assert hits == {name: name for name in hits}, hits
        # Phones zoom the page into a text box whose text is under 16px (iOS Safari).
        size = page.get_by_label("Your message").evaluate("i => getComputedStyle(i).fontSize")
        assert float(size.removesuffix("px")) >= 16, size

        page.get_by_label("Your message").fill("my worker crashed")
        page.get_by_role("button", name="Send").tap()
        expect(page.get_by_text("Which product are you using?")).to_be_visible()
        page.get_by_role("button", name="Close chat").tap()
        expect(panel).to_be_hidden()
        launcher = page.get_by_role("button", name="Open chat")
        expect(launcher).to_be_visible()
        launcher.tap()
        expect(panel).to_be_visible()
    finally:
        context.close()
