"""The operator's console and the answer-link page in headless Chromium against a real
server and worker processes on real Redis (issue 16's acceptance: filter runs, open a run,
its timeline, answer from the inbox, cancel, a new hook appears live within a second,
axe-core finds no serious or critical violation; a signed link answers once)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from runtime.models import RunStatus
from tests.processes import wait_until

from .conftest import screenshot
from .stack import API_KEY, Stack

OPERATOR = "operator-secret-0123456789"
READER = "reader-secret-0123456789"
LINK_KEY = "k1=link-secret-0123456789abcdef"
QUESTION = "Which product are you using?"


@pytest.fixture
def console_stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(
        PARLEY_API_KEYS=f"ops:operator:{OPERATOR},auditor:reader:{READER}",
        PARLEY_LINK_KEYS=LINK_KEY,
    )


def start_agent(stack: Stack, text: str = "my worker crashed") -> tuple[str, str]:
    """A support-agent run without a chat session, waiting on its question."""
    r = stack.http.post("/api/runs", json={"workflow": "support_agent", "args": [text]})
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    found: dict[str, Any] = {}

    def pending() -> bool:
        run = stack.http.get(f"/api/runs/{run_id}").json()
        if run["status"] == "suspended" and run["pending_hooks"]:
            found.update(run["pending_hooks"][0])
            return True
        return False

    wait_until(pending, 20, f"the question of {run_id}")
    return run_id, found["token"]


def sign_in(page: Page, stack: Stack, key: str = API_KEY) -> None:
    page.goto(stack.url + "/console")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible()


def assert_accessible(page: Page, where: str) -> None:
    results = Axe().run(page)
    bad = [
        (v["id"], v["impact"], v["help"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not bad, f"{where}: {bad}"


def test_console_runs_timeline_cancel_inbox_live(page: Page, console_stack: Stack) -> None:
    stack = console_stack
    answered_run, _ = start_agent(stack)
    cancelled_run, _ = start_agent(stack)
    sign_in(page, stack)
    assert_accessible(page, "runs")
    screenshot(page, "console-1-runs")

    # Filter by status: both are suspended.
    page.get_by_label("Status").select_option("suspended")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(page.get_by_text("1\u20132 of 2 runs")).to_be_visible()

    # Open a run: its timeline and its pending hook; cancel it.
    page.get_by_role("link", name=cancelled_run).click()
    expect(page.get_by_role("heading", name=f"Run {cancelled_run}")).to_be_visible()
    timeline = page.get_by_role("list", name="Timeline of events")
    expect(timeline.locator("li[data-type='workflow.started']")).to_have_count(1)
    expect(timeline.locator("li[data-type='hook.created']")).to_contain_text(QUESTION)
    expect(timeline.locator("li[data-type='step.suspended']")).to_have_count(1)
    expect(page.get_by_role("heading", name="Pending hooks (1)")).to_be_visible()
    assert_accessible(page, "run page")
    screenshot(page, "console-2-run")
    page.get_by_role("button", name="Cancel run").click()
    page.get_by_role("button", name="Confirm: cancel this run").click()
    expect(page.locator(".pc-facts .pc-status")).to_have_text("cancelled")
    expect(timeline.locator("li[data-type='workflow.cancelled']")).to_contain_text(
        "cancelled by default in the console"
    )
    assert stack.http.get(f"/api/runs/{cancelled_run}").json()["status"] == "cancelled"

    # Filter by status again: only the cancelled one.
    page.goto(stack.url + "/console#/runs?status=cancelled")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(cancelled_run)

    # The approvals inbox: answer in place.
    page.get_by_role("link", name="Approvals inbox").click()
    card = page.get_by_role("article", name=QUESTION)
    expect(card).to_have_count(1)
    expect(card).to_contain_text(answered_run)
    expect(card).to_contain_text("waiting")
    assert_accessible(page, "inbox")
    screenshot(page, "console-3-inbox")
    card.get_by_role("button", name="Parley Cloud").click()
    expect(page.get_by_text("Nothing is waiting for an answer.")).to_be_visible()
    wait_until(
        lambda: stack.http.get(f"/api/runs/{answered_run}").json()["status"] == "completed",
        20,
        "the answered run to complete",
    )

    # A hook created while the inbox is open appears without a reload, within a second.
    r = stack.http.post("/api/runs", json={"workflow": "support_agent", "args": ["it is slow"]})
    new_run = r.json()["run_id"]
    wait_until(lambda: bool(stack.pending_hooks()), 20, "the new hook")
    created = time.monotonic()
    expect(page.get_by_role("article", name=QUESTION)).to_contain_text(new_run, timeout=1000)
    print(f"\nnew hook shown in the inbox {1000 * (time.monotonic() - created):.0f} ms after it")
    expect(page.locator("#pc-inbox-count")).to_have_text("1")

    # answered_by in the answered run's timeline.
    page.goto(f"{stack.url}/console#/runs/{answered_run}")
    received = page.locator("li[data-type='hook.received']")
    expect(received).to_contain_text('"Parley Cloud"')
    expect(received).to_contain_text("answered by key:default")
    expect(page.locator("li[data-type='step.completed']").first).to_contain_text(" in ")

    page.get_by_role("link", name="Metrics").click()
    expect(page.locator("[data-metric='Runs started']")).to_have_text("3")
    expect(page.get_by_role("img", name="Last hour", exact=False)).to_be_visible()
    assert_accessible(page, "metrics")
    screenshot(page, "console-4-metrics")


def test_reader_sees_but_cannot_answer_or_cancel(page: Page, console_stack: Stack) -> None:
    run_id, token = start_agent(console_stack)
    sign_in(page, console_stack, READER)
    expect(page.get_by_text("Signed in as auditor (reader)")).to_be_visible()
    page.goto(f"{console_stack.url}/console#/runs/{run_id}")
    expect(page.get_by_role("heading", name="Pending hooks (1)")).to_be_visible()
    expect(page.get_by_text("Your key cannot answer (reader scope).")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    expect(page.get_by_role("button", name="Parley Cloud")).to_have_count(0)
    # And the server agrees, whatever the page shows.
    headers = {"Authorization": f"Bearer {READER}"}
    r = httpx.post(f"{console_stack.url}/api/hooks/{token}", json={"payload": "x"}, headers=headers)
    assert r.status_code == 403
    assert_accessible(page, "run page (reader)")


def test_answer_link_page_in_the_browser(page: Page, console_stack: Stack) -> None:
    stack = console_stack
    run_id, token = start_agent(stack)
    minted = stack.http.post(f"/api/hooks/{token}/link", json={"who": "bob"}).json()
    page.goto(minted["url"])
    expect(page.get_by_role("heading", name="A question for you")).to_be_visible()
    choices = page.get_by_role("group", name=QUESTION)
    expect(choices.get_by_role("button")).to_have_text(
        ["Parley Cloud", "Parley Self-hosted", "Something else"]
    )
    assert_accessible(page, "answer page")
    screenshot(page, "link-1-question")
    choices.get_by_role("button", name="Parley Self-hosted").click()
    expect(page.get_by_text("Thank you — your answer was recorded.")).to_be_visible()
    wait_until(
        lambda: stack.http.get(f"/api/runs/{run_id}").json()["status"] == "completed",
        20,
        "the run to complete",
    )
    received = [
        e["data"]
        for e in stack.http.get(f"/api/runs/{run_id}/events").json()["events"]
        if e["type"] == "hook.received"
    ]
    assert received == [
        {
            "hook_id": token.split(":", 1)[1],
            "payload": "Parley Self-hosted",
            "answered_by": "link:k1:bob",
        }
    ]
    # The same link again: already answered.
    page.goto(minted["url"])
    expect(page.get_by_role("heading", name="Already answered")).to_be_visible()
    screenshot(page, "link-2-already-answered")
    # An altered link: a clear page.
    v, kid, payload, sig = minted["link"].split(".")
    page.goto(f"{stack.url}/a/{v}.{kid}.{payload}.{sig[::-1]}")
    expect(page.get_by_role("heading", name="This link is not valid")).to_be_visible()
    expect(page.get_by_text("Nothing was changed.")).to_be_visible()
    assert_accessible(page, "refusal page")


@pytest.fixture
def apps_stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(
        apps=("tests.apps.versions_app", "tests.apps.children_app"),
        PARLEY_API_KEYS=f"ops:operator:{OPERATOR},auditor:reader:{READER}",
        PARLEY_VERSION="v1",
    )


def start_run(stack: Stack, workflow: str, *args: Any, until: str) -> str:
    r = stack.http.post("/api/runs", json={"workflow": workflow, "args": list(args)})
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    wait_until(
        lambda: stack.http.get(f"/api/runs/{run_id}").json()["status"] == until,
        20,
        f"{run_id} ({workflow}) to be {until}",
    )
    return run_id


def test_traceback_version_children_and_retry(page: Page, apps_stack: Stack) -> None:
    stack = apps_stack
    failed = start_run(stack, "failing_kid_wf", until="failed")
    parent = start_run(stack, "parent_wf", 3, until="completed")
    sign_in(page, stack, OPERATOR)

    # The version filter and column.
    page.get_by_label("Version").fill("v1")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(4)  # the failed run, the parent and its two children
    expect(rows.first).to_contain_text("v1")
    page.get_by_label("Version").fill("v0")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No runs match.")).to_be_visible()

    # What is typed right after pressing Filter, before the browser's hashchange event for
    # that press has come (a loaded machine, a fast typist), is kept when the view renders
    # the filter's results (it once rebuilt the form from the URL, and the next press sent
    # the old filter again).
    page.get_by_label("Version").fill("")
    page.evaluate(
        """() => {
        const form = document.querySelector("form.pc-filters");
        form.elements.workflow.value = "parent_wf";
        form.requestSubmit();
        form.elements.version.value = "v0";
        }"""
    )
    expect(rows).to_have_count(1)  # the view for workflow=parent_wf has rendered
    expect(page.get_by_label("Version")).to_have_value("v0")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"workflow=parent_wf&version=v0$"))
    expect(page.get_by_text("No runs match.")).to_be_visible()

    # A failed run: its version, and the traceback under the error line, collapsed.
    page.goto(f"{stack.url}/console#/runs/{failed}")
    expect(page.get_by_role("heading", name=f"Run {failed}")).to_be_visible()
    expect(page.locator(".pc-facts dt:text-is('Version') + dd")).to_have_text("v1")
    details = page.locator("li[data-type='workflow.failed'] details")
    expect(details.locator("summary")).to_have_text("ValueError: the child cannot")
    traceback = details.locator("pre")
    expect(traceback).to_be_hidden()
    details.locator("summary").click()
    expect(traceback).to_be_visible()
    expect(traceback).to_contain_text("in failing_kid_wf")
    expect(traceback).to_contain_text("Traceback (most recent call last)")
    assert_accessible(page, "failed run with its traceback")
    screenshot(page, "console-5-traceback")

    # A parent run links to its children, and a child back to its parent.
    children = stack.http.get(f"/api/runs/{parent}").json()["child_run_ids"]
    assert len(children) == 2
    page.goto(f"{stack.url}/console#/runs/{parent}")
    links = page.locator("[data-fact='Child runs'] a")
    expect(links).to_have_text(children)
    links.first.click()
    expect(page.get_by_role("heading", name=f"Run {children[0]}")).to_be_visible()
    page.locator("[data-fact='Parent run']").get_by_role("link", name=parent).click()
    expect(page.get_by_role("heading", name=f"Run {parent}")).to_be_visible()
    assert_accessible(page, "parent run")

    # A blocked run (its code changed under it) shows Retry; with the right code back,
    # Retry sends it to the workers and it waits on its next question.
    blocked = start_run(stack, "deploy_wf", until="suspended")
    [approve] = stack.http.get(f"/api/runs/{blocked}").json()["pending_hooks"]
    stack.workers[0].stop()
    swapped = stack.start_worker(PARLEY_TEST_VARIANT="swap")
    r = stack.http.post(f"/api/hooks/{approve['token']}", json={"payload": "yes"})
    assert r.status_code in (200, 202), r.text
    wait_until(
        lambda: stack.http.get(f"/api/runs/{blocked}").json()["status"] == "blocked",
        20,
        "the run to be blocked",
    )
    swapped.stop()
    stack.start_worker(PARLEY_TEST_VARIANT="a")
    page.goto(f"{stack.url}/console#/runs/{blocked}")
    expect(page.locator(".pc-facts .pc-status")).to_have_text("blocked")
    expect(page.locator("li[data-type='workflow.blocked']")).to_have_count(1)
    assert_accessible(page, "blocked run")
    screenshot(page, "console-6-blocked")
    page.get_by_role("button", name="Retry").click()
    expect(page.locator(".pc-facts .pc-status")).to_have_text("suspended", timeout=15_000)
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    expect(page.get_by_role("heading", name="Pending hooks (1)")).to_be_visible()

    # A finished run has no Retry.
    page.goto(f"{stack.url}/console#/runs/{failed}")
    expect(page.get_by_role("heading", name=f"Run {failed}")).to_be_visible()
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)


def test_restart_is_offered_where_the_server_takes_it_and_a_refusal_is_said(
    page: Page, stack: Stack
) -> None:
    run_id, token = start_agent(stack)
    stack.workers[0].stop()  # what the answer below sends to the workers stays pending
    sign_in(page, stack)
    page.goto(f"{stack.url}/console#/runs/{run_id}")
    expect(page.locator(".pc-facts .pc-status")).to_have_text("suspended")
    restart = page.get_by_role("button", name="Restart (new run, same input)")
    expect(restart).to_be_visible()
    # The run is answered elsewhere while the page shows it (the focus in its hook card
    # keeps the page from being read again): the server now refuses the restart.
    page.locator(".pc-hook").get_by_role("button", name="Parley Cloud").focus()
    r = stack.http.post(f"/api/hooks/{token}", json={"payload": "Parley Cloud"})
    assert r.status_code == 200, r.text
    assert stack.http.get(f"/api/runs/{run_id}").json()["status"] == "pending"
    restart.click()
    expect(page.locator("#pc-toast")).to_contain_text("a pending run cannot be restarted now")
    # read again: a pending run is not offered a restart at all
    expect(page.locator(".pc-facts .pc-status")).to_have_text("pending")
    expect(restart).to_have_count(0)


def continued_run(page: Page, stack: Stack) -> str:
    """A run that answered its question and continued as new, the only row of the console's
    runs list filtered to ``continued``."""
    r = stack.http.post("/api/runs", json={"workflow": "widget_continued", "args": ["hi"]})
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    wait_until(
        lambda: bool(stack.http.get(f"/api/runs/{run_id}").json()["pending_hooks"]),
        20,
        "a question",
    )
    [hook] = stack.http.get(f"/api/runs/{run_id}").json()["pending_hooks"]
    stack.http.post(f"/api/hooks/{hook['token']}", json={"payload": "alpha"})
    wait_until(
        lambda: stack.http.get(f"/api/runs/{run_id}").json()["status"] == "continued",
        20,
        "the run to continue as new",
    )
    sign_in(page, stack)
    page.get_by_label("Status").select_option("continued")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody tr").first).to_contain_text(run_id)
    return run_id


def test_a_run_that_continued_as_new_is_shown_finished(page: Page, stack: Stack) -> None:
    run_id = continued_run(page, stack)

    reads: list[str] = []
    page.on("request", lambda req: reads.append(req.url) if req.url.endswith(run_id) else None)
    page.goto(f"{stack.url}/console#/runs/{run_id}")
    expect(page.locator(".pc-facts .pc-status")).to_have_text("continued")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)  # finished
    page.wait_for_timeout(2_500)  # a run still going is read again every 2 s; not this one
    assert len(reads) == 1, reads


# The look of a status badge (dom.js's statusBadge) on the console's page, per status: the
# computed values of LOOK, evaluated with [statuses, LOOK].
BADGE_LOOKS = """async ([statuses, properties]) => {
  const { statusBadge } = await import("/widget/console/dom.js");
  const looks = {};
  for (const status of statuses) {
    const badge = document.getElementById("pc-main").appendChild(statusBadge(status));
    const style = getComputedStyle(badge);
    looks[status] = Object.fromEntries(properties.map((p) => [p, style.getPropertyValue(p)]));
    badge.remove();
  }
  return looks;
}"""
# What a badge looks like: its colours, and what tells it apart besides them (SHAPE).
SHAPE = ("border-top-style", "border-top-width", "font-style", "font-weight")
LOOK = ("color", "border-top-color", "background-color", *SHAPE)
TRANSPARENT = "rgba(0, 0, 0, 0)"
UNSTYLED = "no-such-status"  # a status the console has no style for


def badge_looks(page: Page, statuses: list[str]) -> dict[str, dict[str, str]]:
    looks: dict[str, dict[str, str]] = page.evaluate(BADGE_LOOKS, [statuses, LOOK])
    return looks


def shape(look: dict[str, str]) -> tuple[str, ...]:
    """A badge's look without its colours: its edge, its type, and whether it is filled."""
    return (*(look[p] for p in SHAPE), str(look["background-color"] != TRANSPARENT))


def _contrast(rgb: str, background: str = "rgb(255, 255, 255)") -> float:
    """WCAG's contrast ratio of two CSS rgb() colours."""

    def luminance(colour: str) -> float:
        channels = [int(c) / 255 for c in re.findall(r"\d+", colour)[:3]]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(rgb), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_a_continued_run_has_a_badge_of_its_own_and_names_the_run_it_continued_as(
    page: Page, stack: Stack
) -> None:
    """The status ``continued`` had no badge style: it looked like a status the console does
    not know, and nothing said which run took the conversation over (``continued_to``)."""
    run_id = continued_run(page, stack)
    successor = stack.http.get(f"/api/runs/{run_id}").json()["continued_to"]
    styled = ["completed", "failed", "cancelled", "suspended", "running", "pending"]
    looks = badge_looks(page, [*styled, "continued", UNSTYLED])
    assert looks["continued"] != looks[UNSTYLED], looks  # styled at all
    assert looks["continued"] not in [looks[s] for s in styled], looks  # and its own
    colour = page.locator("tbody tr .pc-status").evaluate("b => getComputedStyle(b).color")
    assert _contrast(colour) >= 4.5, colour
    row = page.locator("tbody tr").first
    onward = row.get_by_role("link", name=f"continued as {successor}")
    expect(onward).to_have_attribute("href", f"#/runs/{successor}")
    assert_accessible(page, "runs list with a continued run")
    screenshot(page, "console-continued-run")
    # The run's page names the run it continued as, and that one names it back.
    row.get_by_role("link", name=run_id).click()
    facts = page.get_by_role("region", name="Run details")
    facts.get_by_role("link", name=successor).click()
    expect(page.get_by_role("heading", name=f"Run {successor}")).to_be_visible()
    expect(
        page.get_by_role("region", name="Run details").get_by_role("link", name=run_id)
    ).to_be_visible()
    expect(page.locator('[data-fact="Continued from"]')).to_have_text(run_id)
    assert_accessible(page, "run page of a continued run's successor")


# Statuses whose badge differs from every other's by more than its colours (an edge or a fill
# no other has), not only from those of the same colour.
SHAPED = {RunStatus.BLOCKED, RunStatus.PARKED, RunStatus.CONTINUED}


@pytest.mark.parametrize("status", list(RunStatus))
def test_every_run_status_has_a_badge_of_its_own(
    page: Page, stack: Stack, status: RunStatus
) -> None:
    """``blocked`` and ``parked`` had no badge style (they looked like unstyled text), and
    ``pending``/``running`` and ``failed``/``cancelled`` shared one. Each status the console
    can show (the runs filter offers every RunStatus) now has a look no other has; one that
    shares its colour with another differs from it by its edge or fill too; and its text
    meets WCAG AA contrast (4.5:1) on what it sits on."""
    sign_in(page, stack)
    offered = (
        page.get_by_label("Status")
        .locator("option")
        .evaluate_all("options => options.map((o) => o.value)")
    )
    assert sorted(offered) == sorted(["", *RunStatus]), offered
    looks = badge_looks(page, [*RunStatus, UNSTYLED])
    mine = looks[status]
    assert mine != looks[UNSTYLED], mine  # styled at all
    alike = [s for s in RunStatus if s != status and looks[s] == mine]
    assert not alike, (status, alike, looks)  # and its own
    by_colour_alone = [
        s
        for s in RunStatus
        if s != status and looks[s]["color"] == mine["color"] and shape(looks[s]) == shape(mine)
    ]
    assert not by_colour_alone, (status, by_colour_alone, looks)
    if status in SHAPED:
        same_shape = [s for s in RunStatus if s != status and shape(looks[s]) == shape(mine)]
        assert not same_shape, (status, same_shape, looks)
    page_background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    grounds = (
        [mine["background-color"]]
        if mine["background-color"] != TRANSPARENT
        else ["rgb(255, 255, 255)", page_background]  # a table's cell or a card; the page
    )
    for ground in grounds:
        assert _contrast(mine["color"], ground) >= 4.5, (status, mine["color"], ground)
    # axe on a page showing it (its colour-contrast rule included)
    page.evaluate(
        """async (status) => {
          const { statusBadge } = await import("/widget/console/dom.js");
          document.getElementById("pc-main").appendChild(statusBadge(status));
        }""",
        status.value,
    )
    expect(page.locator(f'#pc-main > .pc-status[data-status="{status}"]')).to_have_text(status)
    assert_accessible(page, f"runs list with a {status} badge")


def test_the_inbox_link_is_named_with_the_number_of_approvals_waiting(
    page: Page, stack: Stack
) -> None:
    start_agent(stack)
    sign_in(page, stack)
    sections = page.get_by_role("navigation", name="Console sections")
    expect(sections.locator("#pc-inbox-count")).to_have_text("1")
    expect(
        sections.get_by_role("link", name=re.compile("^Approvals inbox"))
    ).to_have_accessible_name("Approvals inbox 1 waiting")


def test_the_answer_page_stays_locked_after_a_refusal_no_second_try_can_change(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    stack = make_stack(PARLEY_LINK_KEYS=LINK_KEY)
    # A question a first() closes: the other one is answered first.
    r = stack.http.post("/api/runs", json={"workflow": "widget_first", "args": ["hi"]})
    assert r.status_code == 201, r.text
    first_run = r.json()["run_id"]
    wait_until(
        lambda: len(stack.http.get(f"/api/runs/{first_run}").json()["pending_hooks"]) == 2,
        20,
        "the two questions",
    )
    hooks = {
        h["name"]: h["token"]
        for h in stack.http.get(f"/api/runs/{first_run}").json()["pending_hooks"]
    }
    closed = stack.http.post(f"/api/hooks/{hooks['close']}/link", json={}).json()["url"]
    page.goto(closed)
    stack.http.post(f"/api/hooks/{hooks['channel']}", json={"payload": "Email"})
    page.get_by_role("button", name="Yes").click()
    expect(page.get_by_role("alert")).to_have_text(
        "This question was withdrawn: the conversation went on without it, so it no longer "
        "takes answers. Nothing more is needed."
    )
    for name in ("Yes", "No"):
        expect(page.get_by_role("button", name=name)).to_be_disabled()

    # A link whose key the server retired while the page was open.
    _, token = start_agent(stack)
    retired = stack.http.post(f"/api/hooks/{token}/link", json={}).json()["url"]
    page.goto(retired)
    stack.stop_server()
    stack.env["PARLEY_LINK_KEYS"] = "k2=another-link-secret-0123456789ab"
    stack.start_server()
    page.get_by_role("button", name="Parley Cloud").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("This link is no longer valid")
    expect(alert).to_contain_text("Ask for a new link.")
    expect(alert).not_to_contain_text("k1")  # the verifier's wording named the key
    expect(page.get_by_role("button", name="Parley Cloud")).to_be_disabled()
    assert stack.pending_hooks()  # nothing was answered


def test_the_answer_page_says_in_plain_words_why_its_link_cannot_be_used(
    page: Page, make_stack: Callable[..., Stack]
) -> None:
    """An answer sent through a link that is not valid (here the page's address is altered
    or cut after it loaded): the person reads what happened and what to do, not the
    verifier's wording ("the link's signature does not match", "expected an answer link
    'v1.<key>...'"); the code stays on the alert for a machine."""
    stack = make_stack(PARLEY_LINK_KEYS=LINK_KEY)
    _, token = start_agent(stack)
    minted = stack.http.post(f"/api/hooks/{token}/link", json={}).json()
    v, kid, payload, sig = minted["link"].split(".")
    altered = {
        "altered": (f"/a/{v}.{kid}.{payload}.{sig[::-1]}", "it was altered or mistyped"),
        "cut": (f"/a/{v}.{kid}.{payload}", "it may have been copied incompletely"),
    }
    for case, (path, plain) in altered.items():
        page.goto(minted["url"])
        page.evaluate("path => history.replaceState(null, '', path)", path)
        page.get_by_role("button", name="Parley Cloud").click()
        alert = page.get_by_role("alert")
        expect(alert).to_contain_text("This link is not valid", timeout=5_000)
        expect(alert).to_contain_text(plain)
        text = alert.text_content() or ""
        assert not re.search(r"signature|expected|v1\.|<|_", text), (case, text)
        expect(alert).to_have_attribute("data-code", "invalid_link")
        expect(page.get_by_role("button", name="Parley Cloud")).to_be_disabled()
    assert stack.pending_hooks()  # nothing was answered
