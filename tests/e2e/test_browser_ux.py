"""Messenger-grade behaviour in headless Chromium against real server and worker
processes: keyboard-only use of every prompt kind, safe markdown, a long streamed answer
that stays in view (or waits behind a "new messages" jump), a worker SIGKILL mid-answer,
sending while offline."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from examples.support_agent.model import long_answer

from .conftest import screenshot
from .hosting import HostSite, embed_page
from .stack import Stack

RECORD_STATES = """
window.parleyStates = [];
document.addEventListener("parley:state", (e) => window.parleyStates.push(e.detail.state));
"""
GAP_TO_BOTTOM = "log => log.scrollHeight - log.scrollTop - log.clientHeight"


def ask_for_the_long_answer(page: Page, until_step: int) -> None:
    """Ask the demo agent for its 44-step answer; return once step ``until_step`` shows.
    The answer's own text is waited for: in the whole log, "step " at the end of a partial
    answer followed by its "12:40 PM" time also reads "step 12"."""
    box = page.get_by_label("Your message")
    box.fill("tell me everything")
    box.press("Enter")
    answer = page.locator(".parley-agent .parley-body")
    expect(answer).to_contain_text(f"step {until_step} of the")


def say(page: Page, text: str) -> None:
    box = page.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")


def agent_page(page: Page, site: HostSite, make_stack: Callable[..., Stack], agent: str) -> Stack:
    stack = make_stack(PARLEY_ALLOWED_ORIGINS=site.origin)
    site.pages["/"] = embed_page(
        stack.url,
        attrs=f'data-target="#chat" data-agent="{agent}" data-title="Test"',
        body='<div id="chat"></div>',
    )
    page.goto(site.url())
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    return stack


def test_keyboard_only_every_prompt_kind(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    agent_page(page, site, make_stack, "widget_kinds")
    box = page.get_by_label("Your message")
    for _ in range(6):
        page.keyboard.press("Tab")
        if box.evaluate("b => b.getRootNode().activeElement === b"):
            break
    expect(box).to_be_focused()
    page.keyboard.type("start")
    page.keyboard.press("Enter")
    expect(box).to_have_value("")
    # enum: focus on the first choice; Tab to the next, Enter picks it
    expect(page.get_by_role("button", name="Free")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    # boolean
    expect(page.get_by_role("button", name="Yes")).to_be_focused()
    page.keyboard.press("Enter")
    # text, named by the question (shown once)
    city = page.get_by_role("textbox", name="Which city?")
    expect(city).to_be_focused()
    expect(page.get_by_text("Which city?")).to_have_count(1)
    page.keyboard.type("Lyon")
    page.keyboard.press("Enter")
    # number
    expect(page.get_by_role("spinbutton", name="How many users?")).to_be_focused()
    page.keyboard.type("3")
    page.keyboard.press("Enter")
    # object: fields in the schema's order, not alphabetical
    form = page.get_by_role("group", name="How do we reach you?")
    expect(form.locator("label")).to_have_text(
        ["Your name", "Email", "Seats", "Plan", "Newsletter"]
    )
    expect(form.get_by_label("Your name")).to_be_focused()
    page.keyboard.type("Ada")
    page.keyboard.press("Tab")
    page.keyboard.type("ada@example.org")
    page.keyboard.press("Tab")
    page.keyboard.type("2")
    page.keyboard.press("Tab")
    page.keyboard.press("ArrowDown")  # Free → Pro
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # newsletter
    page.keyboard.press("Tab")
    expect(form.get_by_role("button", name="Send answer")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_text("Done: Pro, True, Lyon, 3, Ada (ada@example.org).")).to_be_visible()
    # answers echoed as readable text
    expect(form).to_contain_text(
        "You answered: Your name: Ada · Email: ada@example.org · Seats: 2 · Plan: Pro · "
        "Newsletter: Yes"
    )
    expect(page.get_by_text("You answered: Pro")).to_be_visible()
    expect(page.get_by_text("You answered: Yes")).to_be_visible()
    # after the last answer the focus is back in the composer, ready for the next message
    expect(box).to_be_focused()
    screenshot(page, "ux-1-keyboard")


def test_an_integer_is_answered_as_the_number_typed_and_a_fraction_is_refused(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    agent_page(page, site, make_stack, "widget_kinds")
    say(page, "start")
    page.get_by_role("button", name="Pro").click()
    page.get_by_role("button", name="Yes").click()
    city = page.get_by_role("textbox", name="Which city?")
    city.fill("Lyon")
    city.press("Enter")
    users = page.get_by_role("spinbutton", name="How many users?")
    users.fill("2.5")  # not an integer: refused, not cut to 2
    users.press("Enter")
    assert users.evaluate("i => i.validity.valid") is False
    expect(page.locator(".parley-prompt[data-state=pending]")).to_have_count(1)
    users.fill("1e3")  # a whole number in exponent form: 1000
    users.press("Enter")
    expect(page.get_by_text("You answered: 1000")).to_be_visible()
    expect(page.get_by_role("group", name="How do we reach you?")).to_be_visible()


def test_markdown_renders_and_markup_stays_text(
    page: Page, site: HostSite, make_stack: Callable[..., Stack]
) -> None:
    agent_page(page, site, make_stack, "widget_markup")
    say(page, "show me")
    agent = page.locator(".parley-agent").first
    expect(agent.locator("strong")).to_have_text(["Bold"])
    link = agent.get_by_role("link", name="safe link")
    expect(link).to_have_attribute("href", "https://example.org/docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(agent.locator("li")).to_have_text(["one", "two"])
    for text in (
        '<img src=x onerror="window.__xss=1">',
        "<script>window.__xss=2</script>",
        "<b>raw bold</b>",
        "<code>",
    ):
        expect(agent).to_contain_text(text)
    expect(agent.get_by_role("link")).to_have_count(1)  # the javascript: one is plain text
    question = page.get_by_text('<b>Pick</b> one <img src=x onerror="window.__xss=4">')
    expect(question).to_be_visible()
    page.get_by_role("button", name="<i>first</i>").click()
    expect(page.get_by_text("You answered: <i>first</i>")).to_be_visible()
    expect(page.get_by_text("You picked <i>first</i>")).to_be_visible()
    counts = page.evaluate(
        """() => {
          const root = document.querySelector(".parley-host").shadowRoot;
          const count = (selector) => root.querySelectorAll(selector).length;
          return { img: count("img"), script: count("script"), b: count("b, i"),
                   xss: window.__xss ?? null };
        }"""
    )
    assert counts == {"img": 0, "script": 0, "b": 0, "xss": None}
    screenshot(page, "ux-2-markdown")


def test_a_long_streamed_answer_stays_in_view_unless_the_visitor_scrolls_up(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_DEMO_CHUNK_DELAY="0.03")
    page.set_viewport_size({"width": 375, "height": 700})
    page.goto(stack.url)
    box = page.get_by_label("Your message")
    log = page.get_by_role("log", name="Conversation")
    ask_for_the_long_answer(page, until_step=30)
    assert log.evaluate(GAP_TO_BOTTOM) < 48  # followed while streaming
    expect(log).to_contain_text("That is all.")
    assert log.evaluate(GAP_TO_BOTTOM) < 2
    assert log.evaluate("l => l.scrollHeight > l.clientHeight + 500")  # it did overflow
    expect(page.locator(".parley-agent li")).to_have_count(44)
    screenshot(page, "ux-3-long-answer")

    # The visitor scrolls up during the next answer: the view stays, a jump appears.
    box.fill("tell me everything again")
    box.press("Enter")
    expect(page.locator(".parley-agent")).to_have_count(2)
    log.hover()
    page.mouse.wheel(0, -5000)
    jump = page.get_by_role("button", name="New messages ↓")
    expect(jump).to_be_visible()
    top = log.evaluate("l => l.scrollTop")
    expect(page.locator(".parley-agent").nth(1)).to_contain_text("That is all.")
    assert abs(log.evaluate("l => l.scrollTop") - top) < 2
    jump.click()
    assert log.evaluate(GAP_TO_BOTTOM) < 2
    expect(jump).to_be_hidden()
    expect(box).to_be_focused()


def test_a_worker_killed_mid_answer_shows_recovering_then_the_whole_answer_once(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_DEMO_CHUNK_DELAY="0.04")
    page.add_init_script(RECORD_STATES)
    page.goto(stack.url)
    log = page.get_by_role("log", name="Conversation")
    ask_for_the_long_answer(page, until_step=12)
    stack.workers[0].kill()  # SIGKILL mid-stream
    stack.start_worker()
    expect(page.get_by_text("The agent was interrupted")).to_be_visible(timeout=15_000)
    screenshot(page, "ux-4-recovering")
    expect(log).to_contain_text("That is all.", timeout=20_000)
    expect(page.locator(".parley-agent")).to_have_count(1)
    expect(page.locator(".parley-agent li")).to_have_count(44)
    text = page.locator(".parley-agent .parley-body").inner_text()
    assert text.count("step 7 ") == 1 and text.count("That is all.") == 1
    assert text.startswith("Here is everything:")
    expect(page.locator(".parley-widget")).to_have_attribute("data-state", "idle")
    states = page.evaluate("window.parleyStates")
    assert states.index("working") < states.index("recovering") < len(states) - 1
    assert states[-1] == "idle"
    assert long_answer().endswith("That is all.")


def test_messages_written_offline_are_sent_when_the_server_is_back(
    page: Page, stack: Stack
) -> None:
    page.goto(stack.url)
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    stack.stop_server()
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    box = page.get_by_label("Your message")
    expect(box).to_be_enabled()
    box.fill("my worker crashed")
    box.press("Enter")
    visitor = page.locator(".parley-visitor")
    expect(visitor).to_contain_text("Will be sent when the connection is back.")
    expect(box).to_be_focused()
    screenshot(page, "ux-5-queued")
    stack.start_server()
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_enabled(timeout=15_000)
    expect(visitor).to_have_count(1)
    expect(visitor.locator(".parley-note")).to_have_text("")
    expect(page.get_by_text("Connection lost")).to_have_count(0)

    # A message the server refuses stays on screen, with the reason and a retry.
    page.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Thanks! For Parley Cloud")).to_be_visible()
    page.evaluate("window.parley.send('x'.repeat(5000))")
    failed = page.locator(".parley-visitor[data-state=failed]")
    expect(failed).to_contain_text("Not sent: the message is too long")
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.get_by_text("a message may have at most")).to_have_count(0)  # no raw API text
