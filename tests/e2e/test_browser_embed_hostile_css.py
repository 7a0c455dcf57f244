"""The widget on a site whose global CSS is aggressive: the root font size changed
(``html { font-size: 62.5% }``, the common "1rem = 10px" trick), every element's font and
box sizing, buttons hidden, paragraphs white. The widget looks exactly as it does on a
plain page: nothing of the page's reaches into its shadow root, not even through ``rem``."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .hosting import HostSite
from .stack import Stack
from .test_demo_restart import ask

HOSTILE = """<style>
html { font-size: 62.5%; }
* { box-sizing: content-box; font-size: 30px; }
button { display: none; }
p { color: white; }
</style>"""

# The computed sizes of the widget's parts, as the visitor sees them.
SIZES = """() => {
  const shadow = document.querySelector("parley-chat").shadowRoot;
  const styles = {};
  const props = ["fontSize", "paddingTop", "paddingLeft", "marginTop", "maxWidth", "height",
                 "rowGap", "display", "color", "boxSizing"];
  for (const sel of [".parley-widget", ".parley-header", ".parley-title", ".parley-connection",
                     ".parley-new", ".parley-log", ".parley-msg.parley-visitor", ".parley-agent",
                     ".parley-agent .parley-time", ".parley-prompt", ".parley-question",
                     ".parley-choices", ".parley-choices button", ".parley-activity",
                     ".parley-composer", ".parley-input", ".parley-send"]) {
    const node = shadow.querySelector(sel);
    const style = getComputedStyle(node);
    styles[sel] = Object.fromEntries(props.map((p) => [p, style[p]]));
  }
  return styles;
}"""


def page_with(server: str, style: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Shop</title>{style}</head>
<body><p>Our host page.</p><div id="chat"></div>
<script type="module" src="{server}/widget/parley-widget.js" data-target="#chat"></script>
</body></html>"""


def sizes_after_a_prompt(page: Page, url: str) -> dict[str, dict[str, str]]:
    ask(page, url)  # a conversation with a prompt on screen
    expect(page.locator(".parley-agent").first).to_be_visible()
    sizes: dict[str, dict[str, str]] = page.evaluate(SIZES)
    return sizes


def test_a_sites_aggressive_global_css_changes_nothing_in_the_widget(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    site.pages["/plain"] = page_with(stack.url, "")
    site.pages["/hostile"] = page_with(stack.url, HOSTILE)
    plain = sizes_after_a_prompt(page, site.url("/plain"))
    page.evaluate("localStorage.clear()")
    hostile = sizes_after_a_prompt(page, site.url("/hostile"))
    # the page's own text did change: its rules apply outside
    assert page.locator("body > p").evaluate("p => getComputedStyle(p).fontSize") == "30px"
    different = {
        sel: {
            p: (plain[sel][p], hostile[sel][p])
            for p in plain[sel]
            if plain[sel][p] != hostile[sel][p]
        }
        for sel in plain
    }
    assert {sel: d for sel, d in different.items() if d} == {}
    assert plain[".parley-title"]["fontSize"] == "16px"
    assert plain[".parley-send"]["display"] != "none"
