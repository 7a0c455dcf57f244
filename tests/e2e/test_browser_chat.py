"""The chat widget in headless Chromium against a real server and worker processes on real
Redis (acceptance 1, 2, 3, 4, 6)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from playwright.sync_api import Page, expect

from examples import trace

from .conftest import screenshot
from .stack import Stack

FINAL = "your runs will resume where they stopped."


def ask(page: Page, stack: Stack, text: str = "my worker crashed") -> None:
    page.goto(stack.url)
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")
    expect(page.get_by_text("Which product are you using?")).to_be_visible()
    # the composer's limit is the server's, from its first frame (the widget copies none)
    expect(box).to_have_attribute("maxlength", "4000")
    expect(page.get_by_text("The agent is waiting for your answer.")).to_be_visible()


def expect_final(page: Page, product: str) -> None:
    expect(page.get_by_text(f"Thanks! For {product}")).to_contain_text(FINAL)
    expect(page.get_by_label("Your message")).to_be_enabled()
    expect(page.get_by_text("You answered: " + product)).to_be_visible()


def prompts_in_outbox(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    client = stack.redis()
    try:
        keys = [k for k in client.scan_iter(match="parley:*session:*:outbox")]
        entries = [orjson.loads(f[b"m"]) for k in keys for _, f in client.xrange(k)]
    finally:
        client.close()
    return [m for m in entries if m.get("type") == "prompt" and m.get("run_id") == run_id]


def test_visitor_clicks_a_choice_and_gets_the_answer(page: Page, stack: Stack) -> None:
    ask(page, stack)
    choices = page.get_by_role("group", name="Which product are you using?")
    expect(choices.get_by_role("button")).to_have_text(
        ["Parley Cloud", "Parley Self-hosted", "Something else"]
    )
    screenshot(page, "chat-1-prompt")
    choices.get_by_role("button", name="Parley Cloud").click()
    expect_final(page, "Parley Cloud")
    # Text streamed before the suspension is shown once, not again after the resume.
    expect(page.get_by_text("I found an article")).to_have_count(1)
    expect(page.get_by_text("Let me look that up for you.")).to_have_count(1)
    screenshot(page, "chat-1-answered")


def test_reload_while_the_prompt_is_pending(page: Page, stack: Stack) -> None:
    ask(page, stack)
    page.reload()
    expect(page.get_by_text("Which product are you using?")).to_have_count(1)
    expect(page.locator(".parley-visitor .parley-body")).to_have_text(["my worker crashed"])
    expect(page.get_by_text("The agent is waiting for your answer.")).to_be_visible()
    page.get_by_role("button", name="Parley Self-hosted").click()
    expect_final(page, "Parley Self-hosted")
    screenshot(page, "chat-2-after-reload")
    # One more reload: the finished conversation is shown once, the prompt as answered.
    page.reload()
    expect(page.get_by_text(FINAL)).to_have_count(1)
    expect(page.get_by_role("button", name="Parley Self-hosted")).to_be_disabled()


def test_worker_killed_while_the_prompt_is_pending(
    demo_trace: Path, page: Page, stack: Stack
) -> None:
    ask(page, stack)
    [hook] = stack.pending_hooks()
    run_id = hook["run_id"]
    expect(page.get_by_label("Your message")).to_be_disabled()
    stack.workers[0].kill()  # SIGKILL
    stack.start_worker()
    page.get_by_role("button", name="Something else").click()
    expect_final(page, "Something else")
    counts = trace.counts(demo_trace, run_id)
    # Each model turn ran exactly once (turns 0 and 1 before the kill, 2 after the
    # answer on the new worker); the visitor was prompted once.
    assert counts == {"turn:0": 1, "turn:1": 1, "turn:2": 1, "on_created": 1}
    assert len(prompts_in_outbox(stack, run_id)) == 1
    expect(page.locator(".parley-prompt")).to_have_count(1)
    screenshot(page, "chat-3-after-worker-kill")


def test_answer_over_http_shows_the_agent_continuing(page: Page, stack: Stack) -> None:
    ask(page, stack)
    [hook] = stack.pending_hooks()
    r = stack.http.post(f"/api/hooks/{hook['token']}", json={"payload": "Parley Cloud"})
    assert r.status_code == 200 and r.json()["recorded"] is True
    expect_final(page, "Parley Cloud")
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_disabled()
    screenshot(page, "chat-4-http-answer")


def test_prompt_expires_while_the_page_is_open(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_DEMO_PROMPT_TIMEOUT="2s")
    ask(page, stack)
    expect(page.get_by_text("This question expired")).to_be_visible()
    expect(page.get_by_text("I didn't hear back from you")).to_contain_text(
        "write to us if it persists."
    )
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_disabled()
    expect(page.get_by_label("Your message")).to_be_enabled()
    screenshot(page, "chat-6-expired")


def test_free_text_prompt_and_connection_drop(page: Page, stack: Stack) -> None:
    page.goto(stack.url)
    box = page.get_by_label("Your message")
    box.fill("please email me")
    box.press("Enter")
    answer_box = page.get_by_role("textbox", name="Which email address should we use to reach you?")
    expect(answer_box).to_be_focused()
    # The server goes away while the prompt is pending: the widget says so and reconnects
    # by itself when it is back; the prompt is still there, once.
    stack.stop_server()
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    screenshot(page, "chat-connection-lost")
    stack.start_server()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible(timeout=15_000)
    expect(page.locator(".parley-prompt")).to_have_count(1)
    answer_box.fill("ada@example.org")
    answer_box.press("Enter")
    expect(page.get_by_text("Thanks! For ada@example.org")).to_contain_text(FINAL)
    expect(page.get_by_text("You answered: ada@example.org")).to_be_visible()


def test_the_langchain_demo_page(page: Page, stack: Stack) -> None:
    page.goto(stack.url + "/langchain")
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill("where is my order 1234?")
    box.press("Enter")
    choices = page.get_by_role("group", name="Refund or reship?")
    expect(choices.get_by_role("button")).to_have_text(["refund", "reship"])
    choices.get_by_role("button", name="refund").click()
    # the page's own suggested question is about the order it names
    expect(page.get_by_text("Done: refund for order 1234.")).to_be_visible()
    expect(page.get_by_text("Let me look that order up.")).to_have_count(1)  # not re-streamed
    # its second suggestion names no order: the agent remembers the first one
    box.fill("can you reship it?")
    box.press("Enter")
    expect(page.locator(".parley-prompt")).to_have_count(2)
    choices = page.get_by_role("group", name="Refund or reship?").nth(1)
    choices.get_by_role("button", name="reship").click()
    expect(page.get_by_text("Done: reship for order 1234.")).to_be_visible()
    screenshot(page, "chat-langchain")
