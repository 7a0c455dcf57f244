"""The console's answer cards when a question closes under the operator (another operator
answered it first, its run was cancelled) and when they are worked through with the
keyboard, in headless Chromium against a real server and worker on real Redis.

A question answered elsewhere while an operator's card showed it vanished with whatever
was said about it: the refusal ("a different answer was already accepted") flashed in the
card, then the card was taken out by the next live update (the inbox) or the next read of
the run (its page), so the operator never learnt whether the answer went in, or who
answered what. And a card answered from the keyboard took the focus with it: the next Tab
started at the top of the page again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Request, expect

from tests.processes import wait_until

from .stack import API_KEY, Stack
from .test_browser_console import OPERATOR, QUESTION, sign_in, start_agent

ELSEWHERE = "already answered by key:default"  # the stack's http client answers as default


def received(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in stack.http.get(f"/api/runs/{run_id}/events").json()["events"]
        if e["type"] == "hook.received"
    ]


def answers_sent(page: Page, key: str) -> list[str]:
    """The answers the page sends with ``key`` from now on (their URLs)."""
    sent: list[str] = []

    def seen(r: Request) -> None:
        mine = r.headers.get("authorization") == f"Bearer {key}"
        if mine and r.method == "POST" and "/api/hooks/" in r.url:
            sent.append(r.url)

    page.on("request", seen)
    return sent


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    """A stack with an operator key (the console's) besides the admin key (the other
    operator's, through the stack's http client)."""
    return make_stack(PARLEY_API_KEYS=f"ops:operator:{OPERATOR}")


def waiting(page: Page, stack: Stack) -> tuple[str, str]:
    """A run waiting on its question, and the console signed in with the operator key."""
    run_id, token = start_agent(stack)
    sign_in(page, stack, OPERATOR)
    return run_id, token


def test_the_operator_who_answers_second_sees_who_won_and_the_card_stays_closed(
    page: Page, stack: Stack
) -> None:
    run_id, token = waiting(page, stack)
    page.get_by_role("link", name="Approvals inbox").click()
    card = page.get_by_role("article", name=QUESTION)
    expect(card).to_have_count(1)
    sent = answers_sent(page, OPERATOR)
    # The operator is on the button (keyboard) when another operator answers; the click
    # follows at once, before or after the live list says the question went.
    choice = card.get_by_role("button", name="Parley Cloud")
    choice.focus()
    page.evaluate(
        """async ([token, key]) => {
          const r = await fetch(`/api/hooks/${encodeURIComponent(token)}`, { method: "POST",
            headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
            body: JSON.stringify({ payload: "Parley Self-hosted" }) });
          if (!r.ok) throw new Error(await r.text());
          const button = [...document.querySelectorAll(".pc-hook button")]
            .find((b) => b.textContent === "Parley Cloud");
          button.click();
        }""",
        [token, API_KEY],
    )
    alert = card.get_by_role("alert")
    expect(alert).to_contain_text("question is closed", ignore_case=True)
    expect(alert).to_contain_text(f"It was {ELSEWHERE}: “Parley Self-hosted”.")
    # A final state: it stays so (live updates come every 250 ms), locked, nothing resent.
    page.wait_for_timeout(1500)
    expect(card).to_have_count(1)
    expect(alert).to_contain_text(f"It was {ELSEWHERE}")
    for name in ("Parley Cloud", "Parley Self-hosted", "Something else"):
        expect(card.get_by_role("button", name=name)).to_be_disabled()
    assert len(sent) <= 1, sent
    assert [r["answered_by"] for r in received(stack, run_id)] == ["key:default"]
    # Dismissed, it goes; the focus lands on the summary, not the page's top.
    dismiss = card.get_by_role("button", name="Dismiss")
    expect(dismiss).to_be_focused()
    page.keyboard.press("Enter")
    expect(card).to_have_count(0)
    summary = page.locator("#pc-inbox-summary")
    expect(summary).to_have_text("Nothing is waiting for an answer.")
    expect(summary).to_be_focused()


def test_a_question_closed_while_an_operator_types_in_it_says_so_and_keeps_the_text(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(apps=("tests.apps.failover_app",))
    ids = [
        stack.http.post("/api/runs", json={"workflow": "failover", "args": [n]}).json()["run_id"]
        for n in (1, 2)
    ]
    wait_until(lambda: len(stack.pending_hooks()) == 2, 20, "two questions")
    tokens = {h["run_id"]: h["token"] for h in stack.pending_hooks()}
    sign_in(page, stack)
    page.get_by_role("link", name="Approvals inbox").click()
    first = page.get_by_role("article", name="question 1?")
    second = page.get_by_role("article", name="question 2?")
    expect(first).to_have_count(1)
    expect(second).to_have_count(1)

    # Answered elsewhere while the operator types an answer.
    box = first.get_by_role("textbox")
    box.fill("half a thought")
    r = stack.http.post(f"/api/hooks/{tokens[ids[0]]}", json={"payload": "from elsewhere"})
    assert r.status_code == 200, r.text
    alert = first.get_by_role("alert")
    expect(alert).to_have_text(
        f"This question is closed: nothing was sent from here. It was {ELSEWHERE}: "
        "“from elsewhere”. "
    )
    expect(box).to_be_disabled()
    expect(box).to_have_value("half a thought")  # still there to copy
    page.wait_for_timeout(1000)
    expect(first).to_have_count(1)

    # Its run cancelled while the operator has typed in its card.
    second.get_by_role("textbox").fill("ok")
    page.locator("#pc-inbox-summary").click()  # the focus elsewhere: the text is enough
    assert stack.http.post(f"/api/runs/{ids[1]}/cancel", json={}).status_code == 200
    expect(second.get_by_role("alert")).to_contain_text("Its run was cancelled.")
    expect(second.get_by_role("button", name="Send answer")).to_be_disabled()
    assert received(stack, ids[1]) == []


def test_the_run_page_keeps_the_refusal_when_it_is_read_again(page: Page, stack: Stack) -> None:
    run_id, token = waiting(page, stack)
    page.goto(f"{stack.url}/console#/runs/{run_id}")
    card = page.locator(".pc-hook")
    expect(card).to_have_count(1)
    r = stack.http.post(f"/api/hooks/{token}", json={"payload": "Parley Self-hosted"})
    assert r.status_code == 200, r.text
    sent = answers_sent(page, OPERATOR)
    card.get_by_role("button", name="Parley Cloud").click()
    alert = card.get_by_role("alert")
    expect(alert).to_contain_text("Your answer was not recorded: this question is closed.")
    expect(alert).to_contain_text(f"It was {ELSEWHERE}: “Parley Self-hosted”.")
    # The run goes on (completes); the page is read again (every 2 s) and keeps the notice.
    page.locator("h1").click()  # the focus out of the card: the page may be read again
    expect(page.locator(".pc-facts .pc-status")).to_have_text("completed", timeout=10_000)
    expect(alert).to_contain_text(f"It was {ELSEWHERE}")
    expect(card.get_by_role("button", name="Parley Cloud")).to_be_disabled()
    assert len(sent) == 1, sent
    card.get_by_role("button", name="Dismiss").click()
    expect(card).to_have_count(0)
    expect(page.get_by_role("heading", name="Pending hooks (0)")).to_be_visible()


def test_answering_from_the_keyboard_moves_on_to_the_next_question(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack()
    runs = [start_agent(stack, f"problem {n}")[0] for n in range(3)]
    sign_in(page, stack)
    page.get_by_role("link", name="Approvals inbox").click()
    cards = page.locator(".pc-hook")
    expect(cards).to_have_count(3)
    order = cards.evaluate_all("cs => cs.map((c) => c.dataset.token)")
    focused_card = "() => document.activeElement.closest('.pc-hook')?.dataset.token ?? null"
    cards.first.get_by_role("button", name="Parley Cloud").focus()
    for n in range(2):
        page.keyboard.press("Enter")
        expect(cards).to_have_count(2 - n)
        wait_until(lambda n=n: page.evaluate(focused_card) == order[n + 1], 5, "the focus on")
        assert page.evaluate("document.activeElement.textContent") == "Parley Cloud"
    page.keyboard.press("Enter")
    summary = page.locator("#pc-inbox-summary")
    expect(summary).to_have_text("Nothing is waiting for an answer.")
    expect(summary).to_be_focused()
    for run_id in runs:
        assert [r["payload"] for r in received(stack, run_id)] == ["Parley Cloud"]
