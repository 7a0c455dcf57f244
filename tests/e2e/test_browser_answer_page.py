"""The answer page of a signed link (/a/<link>, widget/answer-page.js) in headless Chromium
against real server and worker processes: an answer refused for itself (it does not fit the
question, it is too long) says in plain words what happened and what to do, never the
runtime's wording, and the form keeps what the person typed, to correct and send again."""

from __future__ import annotations

import re
from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.processes import wait_until

from .answer_app import POSTCODE, QUESTION
from .stack import Stack

LINK_KEY = "k1=link-secret-0123456789abcdef"
# What a person must not read: the runtime's wording (schema paths and rules, byte counts).
TECHNICAL = re.compile(r"schema|\(root\)|\^\[|bytes|limit is|payload|_")


def postcode_link(stack: Stack) -> tuple[str, str]:
    r = stack.http.post("/api/runs", json={"workflow": POSTCODE, "args": []})
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    found: dict[str, str] = {}

    def pending() -> bool:
        hooks = stack.http.get(f"/api/runs/{run_id}").json()["pending_hooks"]
        if hooks:
            found["token"] = hooks[0]["token"]
        return bool(hooks)

    wait_until(pending, 20, f"the question of {run_id}")
    minted = stack.http.post(f"/api/hooks/{found['token']}/link", json={}).json()
    return run_id, minted["url"]


def test_a_refused_answer_says_in_plain_words_what_to_do_and_keeps_what_was_typed(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(apps=("tests.e2e.answer_app",), PARLEY_LINK_KEYS=LINK_KEY)
    run_id, url = postcode_link(stack)
    page.goto(url)
    box = page.get_by_role("textbox", name=QUESTION)
    send = page.get_by_role("button", name="Send answer")
    alert = page.locator("#parley-error")
    cases = {
        # the schema's pattern, which only the server checks
        "invalid_payload": ("75A01", "does not fit the question"),
        # past the runtime's 64 KiB for an answer, and past the server's 256 KiB for a body
        "payload_too_large": ("7" * 70_000, "is too long"),
        "request_too_large": ("7" * 300_000, "is too long"),
    }
    for code, (typed, plain) in cases.items():
        box.fill(typed)
        send.click()
        expect(alert).to_have_attribute("data-code", code, timeout=5_000)
        expect(alert).to_contain_text(plain)
        expect(alert).to_contain_text("send it again")
        text = alert.text_content() or ""
        assert not TECHNICAL.search(text), (code, text)
        # what they typed is still there, the form open to correct it
        expect(box).to_have_value(typed)
        expect(box).to_be_enabled()
        expect(box).to_be_focused()
    box.fill("75001")
    send.click()
    expect(page.get_by_text("Thank you — your answer was recorded.")).to_be_visible()
    expect(alert).to_have_text("")
    wait_until(
        lambda: stack.http.get(f"/api/runs/{run_id}").json()["status"] == "completed",
        20,
        "the run to complete",
    )
    assert stack.http.get(f"/api/runs/{run_id}").json()["result"] == "75001"
