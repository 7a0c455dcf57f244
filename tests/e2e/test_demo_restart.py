"""``parley demo`` keeps its conversations across restarts (its private redis-server with a
data directory), says once when it cannot, and a page whose conversation is gone says so."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .conftest import screenshot
from .demo import DemoProcess

FINAL = "your runs will resume where they stopped."


@pytest.fixture
def demos() -> Iterator[list[DemoProcess]]:
    started: list[DemoProcess] = []
    yield started
    for demo in started:
        demo.close()


def ask(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    box = page.get_by_label("Your message")
    box.fill("my worker crashed")
    box.press("Enter")
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_enabled()


def test_a_restarted_demo_still_has_the_conversation_and_its_prompt(
    page: Page, tmp_path: Path, demos: list[DemoProcess]
) -> None:
    demo = DemoProcess(env={"PARLEY_DEMO_DATA_DIR": str(tmp_path / "data")})
    demos.append(demo)
    ask(page, demo.url)
    assert demo.stop() in (0, -15)
    expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
    demo.start()  # same port, same data directory
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible(timeout=15_000)
    expect(page.locator(".parley-prompt")).to_have_count(1)
    page.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Thanks! For Parley Cloud")).to_contain_text(FINAL)
    # and a page opened after the restart shows the whole conversation, once
    page.reload()
    expect(page.get_by_text(FINAL)).to_have_count(1)
    expect(page.locator(".parley-prompt")).to_have_count(1)
    screenshot(page, "demo-restarted")
    output = demo.log()
    assert output.count("conversations are kept in") == 2
    assert "memory://" not in output and "redis://:***@127.0.0.1" in output


def test_a_volatile_demo_says_so_and_a_lost_conversation_is_shown_as_expired(
    page: Page, demos: list[DemoProcess]
) -> None:
    demo = DemoProcess("--volatile")
    demos.append(demo)
    ask(page, demo.url)
    demo.stop()
    demo.start()  # the embedded store starts empty: the session is gone
    expect(page.get_by_text("This conversation has expired.")).to_be_visible(timeout=15_000)
    expect(page.get_by_text("no such session")).to_have_count(0)
    page.get_by_role("button", name="Start a new conversation").click()
    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_visible()
    assert demo.log().count("parley demo: --volatile") == 2  # once per start


def test_without_redis_server_the_demo_warns_once_that_it_keeps_nothing(
    demos: list[DemoProcess],
) -> None:
    # a PATH with python's own directory but no redis-server
    demo = DemoProcess(env={"PATH": os.path.dirname(sys.executable)})
    demos.append(demo)
    output = demo.log()
    assert output.count("redis-server was not found") == 1, output
    assert "conversations are LOST when it stops" in output
    assert "store memory://demo" in output
