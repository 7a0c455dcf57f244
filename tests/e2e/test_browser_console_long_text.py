"""A long question in the console, in headless Chromium against a real server and worker:
it wraps inside its card, keeps its lines, and stays text.

A prompt with a long word (a URL, an id, a pasted log line) made its card as wide as the
word, and the whole console scrolled sideways (4181 px of page in an 1100 px window);
the lines of a prompt of several lines ran together into one."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.processes import wait_until

from .stack import Stack
from .test_browser_console import assert_accessible, sign_in

WORD = "https://example.org/" + "a" * 300
PROMPT_ARG = f"{WORD}\nsecond line <script>window.__xss=1</script> <b>not bold</b>"

# How far the page and the question's card reach sideways, and the question as shown.
LAYOUT = """() => {
  const card = document.querySelector(".pc-hook");
  return { page: document.documentElement.scrollWidth, window: innerWidth,
    card: card.getBoundingClientRect().right, question: card.querySelector("h3").innerText,
    xss: window.__xss ?? null };
}"""


def test_a_long_question_of_several_lines_wraps_in_its_card(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(apps=("tests.apps.failover_app",))
    r = stack.http.post("/api/runs", json={"workflow": "failover", "args": [PROMPT_ARG]})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    wait_until(lambda: bool(stack.pending_hooks()), 20, "the question")
    sign_in(page, stack)
    for where in ("#/inbox", f"#/runs/{run_id}"):
        page.goto(f"{stack.url}/console{where}")
        expect(page.locator(".pc-hook h3")).to_contain_text("second line")
        layout = page.evaluate(LAYOUT)
        assert layout["page"] <= layout["window"], (where, layout)
        assert layout["card"] <= layout["window"], (where, layout)
        assert layout["question"].split("\n") == [
            f"question {WORD}",
            "second line <script>window.__xss=1</script> <b>not bold</b>?",
        ], (where, layout["question"])
        assert layout["xss"] is None
        expect(page.get_by_role("textbox")).to_be_visible()
        assert_accessible(page, f"a long question ({where})")
