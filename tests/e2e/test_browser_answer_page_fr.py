"""The answer page of a signed link (/a/<link>) speaks the visitor's language as the
widget chooses it (the browser's, when it is one the widget speaks), in headless Chromium
with a French locale against real server and worker processes: its title, the form's
words (the widget's own: i18n.js), why an answer was not recorded, the thanks, and the
pages of a link that cannot be used. It was English only."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from server.links import ANSWER_ERRORS, REFUSALS
from tests.processes import wait_until

from .answer_app import QUESTION
from .stack import Stack
from .test_browser_a11y import serious
from .test_browser_answer_page import LINK_KEY, TECHNICAL, postcode_link


@pytest.fixture
def french(browser: Browser) -> Iterator[Page]:
    """A page of a browser set to French (navigator.language "fr-FR", Accept-Language)."""
    context = browser.new_context(locale="fr-FR", viewport={"width": 1100, "height": 800})
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def test_the_answer_page_speaks_french_to_a_french_browser(
    french: Page, make_stack: Callable[..., Stack]
) -> None:
    page = french
    stack = make_stack(apps=("tests.e2e.answer_app",), PARLEY_LINK_KEYS=LINK_KEY)
    run_id, url = postcode_link(stack)
    page.goto(url)
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    expect(page.get_by_role("heading", name="Une question pour vous")).to_be_visible()
    assert page.title() == "Une question pour vous — Parley"
    expect(page.get_by_text("Merci de répondre avant le")).to_be_visible()
    box = page.get_by_role("textbox", name=QUESTION)  # the question is the workflow's own
    send = page.get_by_role("button", name="Envoyer la réponse")  # the widget's words
    alert = page.locator("#parley-error")
    assert serious(page) == []
    for code, typed, plain in [
        ("invalid_payload", "75A01", "Cette réponse ne correspond pas à la question"),
        ("payload_too_large", "7" * 70_000, "Cette réponse est trop longue"),
    ]:
        box.fill(typed)
        send.click()
        expect(alert).to_have_attribute("data-code", code)
        expect(alert).to_contain_text(plain)
        expect(alert).to_contain_text("renvoyez-la")
        assert not TECHNICAL.search(alert.text_content() or "")
        expect(box).to_be_enabled()
    box.fill("75001")
    send.click()
    expect(page.get_by_text("Merci — votre réponse a été enregistrée.")).to_be_visible()
    wait_until(
        lambda: stack.http.get(f"/api/runs/{run_id}").json()["status"] == "completed",
        20,
        "the run to complete",
    )
    # the link again, answered: its page says so in French too
    page.goto(url)
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    expect(page.get_by_role("heading", name="Déjà répondu")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text(
        "Cette question a déjà reçu une réponse, et elle n\u2019en prend qu\u2019une. "
        "Rien de plus n\u2019est nécessaire."
    )
    assert serious(page) == []
    # an altered link
    page.goto(url[:-3] + ("AAA" if not url.endswith("AAA") else "BBB"))
    expect(page.get_by_role("heading", name="Ce lien n\u2019est pas valide")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Rien n\u2019a été changé.")


def test_every_reason_the_server_gives_has_its_french_words(
    french: Page, make_stack: Callable[..., Stack]
) -> None:
    """Each refusal (REFUSALS) and answer error (ANSWER_ERRORS) of server/links.py, which
    the page shows in English as the server writes it, has its words in French."""
    stack = make_stack(PARLEY_LINK_KEYS=LINK_KEY)
    french.goto(f"{stack.url}/a/not-a-link")
    expect(french.get_by_role("heading", name="Ce lien n\u2019est pas valide")).to_be_visible()
    fr: list[str] = french.evaluate(
        "import('/widget/i18n.js').then((m) => Object.keys(m.ANSWER_PAGE.fr))"
    )
    missing = [f"title_{r}" for r in REFUSALS if f"title_{r}" not in fr]
    missing += [f"refusal_{r}" for r in REFUSALS if f"refusal_{r}" not in fr]
    missing += [f"answer_{c}" for c in ANSWER_ERRORS if f"answer_{c}" not in fr]
    assert missing == []
