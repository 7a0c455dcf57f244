"""The widget's snippet pasted twice on one page (by a tag manager and by hand): one chat,
not two launchers over each other showing one conversation twice."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from .hosting import HostSite, embed_page
from .stack import Stack


def test_the_snippet_pasted_twice_mounts_one_chat(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    once = embed_page(stack.url, attrs='data-title="Shop support"')
    tag = once[once.index("<script type=") : once.index("</script>") + len("</script>")]
    site.pages["/"] = once.replace(tag, tag + "\n" + tag)
    page.goto(site.url())
    launcher = page.get_by_role("button", name="Open chat")
    expect(launcher).to_have_count(1)
    launcher.click()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    assert page.locator("parley-chat").count() == 1
    assert page.evaluate("() => document.scripts.length") == 2  # (both tags are there)
