"""Chat workflows the widget's browser tests talk to (registered on import; the e2e stack
offers them as chat workflows a page picks with ``data-agent``)."""

from __future__ import annotations

from typing import Any

from runtime import (
    child,
    continue_as_new,
    current_run,
    emit,
    first,
    hook,
    sleep,
    step,
    step_hook,
    workflow,
)

KINDS = "widget_kinds"
MARKUP = "widget_markup"
LINKS = "widget_links"
FIRST = "widget_first"
CONTINUED = "widget_continued"
FIRST_CHILD = "widget_first_child"

CONTACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Contact",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "plan": {"type": "string", "title": "Plan", "enum": ["Free", "Pro"]},
        "seats": {"type": "integer", "title": "Seats", "minimum": 1},
        "newsletter": {"type": "boolean", "title": "Newsletter"},
    },
    # Neither alphabetical nor the order of "required": the form must follow it.
    "x-order": ["name", "email", "seats", "plan", "newsletter"],
    "required": ["email", "name"],
}

# Markup and scripts in agent text and in prompts: all of it must stay text.
XSS_TEXT = (
    '**Bold** and a [safe link](https://example.org/docs "docs"), a list:\n\n'
    "- one\n- two\n\n"
    '`<code>` and <img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script> '
    "and [bad link](javascript:window.__xss=3) and <b>raw bold</b>."
)
XSS_QUESTION = '<b>Pick</b> one <img src=x onerror="window.__xss=4">'
XSS_CHOICES = ["<i>first</i>", "second <script>window.__xss=5</script>"]


@step(name="say")
async def say(key: str, text: str) -> None:
    await emit(
        {"type": "text", "message_id": f"{current_run().run_id}:{key}", "seq": 0, "delta": text}
    )


@step(name="ask")
async def ask(name: str, prompt: str, schema: dict[str, Any]) -> Any:
    return await step_hook(name, prompt=prompt, schema=schema, timeout="10m")


@workflow(name=KINDS)
async def widget_kinds(message: str) -> dict[str, Any]:
    """Every kind of prompt the widget renders, one after the other."""
    plan = await ask("plan", "Which plan?", {"type": "string", "enum": ["Free", "Pro"]})
    more = await ask("more", "Shall we go on?", {"type": "boolean"})
    city = await ask("city", "Which city?", {"type": "string", "minLength": 1})
    count = await ask("count", "How many users?", {"type": "integer", "minimum": 1})
    contact = await ask("contact", "How do we reach you?", CONTACT_SCHEMA)
    reply = f"Done: {plan}, {more}, {city}, {count}, {contact['name']} ({contact['email']})."
    await say("done", reply)
    return {"reply": reply}


@workflow(name=MARKUP)
async def widget_markup(message: str) -> dict[str, Any]:
    """Agent text and a prompt full of markup."""
    await say("xss", XSS_TEXT)
    choice = await ask("pick", XSS_QUESTION, {"type": "string", "enum": XSS_CHOICES})
    await say("end", f"You picked {choice}")
    return {"reply": str(choice)}


LINKS_TEXT = (
    "![a cat](https://example.org/cat.png) and ![](https://example.org/no-alt.png), "
    "[the docs](/docs/page), [elsewhere](//example.net/x), "
    "[upper](JaVaScRiPt:window.__xss=6), [spaced]( javascript:window.__xss=7), "
    "![bad](javascript:window.__xss=8) and [mail](mailto:help@example.org)."
)


@workflow(name=LINKS)
async def widget_links(message: str) -> dict[str, Any]:
    """Agent text with images and links of every kind of address."""
    await say("links", LINKS_TEXT)
    return {"reply": "shown"}


@workflow(name=FIRST)
async def widget_first(message: str) -> dict[str, Any]:
    """Two questions at once; the first answered wins, the other is withdrawn (closed)."""
    which, answer = await first(
        hook(
            "channel",
            timeout="10m",
            schema={"type": "string", "enum": ["Email", "Phone"]},
            prompt="How should we reach you?",
        ),
        hook(
            "close",
            timeout="10m",
            schema={"type": "boolean"},
            prompt="Or shall we close the ticket?",
        ),
    )
    reply = f"Went with {['channel', 'close'][which]}: {answer}."
    await say("done", reply)
    return {"reply": reply}


@workflow(name="widget_detail")
async def widget_detail() -> Any:
    """A child run that asks the visitor in its parent's chat."""
    return await hook("detail", timeout="10m", schema={"type": "string"}, prompt="Anything to add?")


@workflow(name=FIRST_CHILD)
async def widget_first_child(message: str) -> dict[str, Any]:
    """A child asks the visitor while the parent waits at most a moment: the moment wins,
    the child (and its prompt) is withdrawn, and the parent ends without a word."""
    which, _ = await first(child(widget_detail), sleep("1s"))
    return {"reply": ["detail", "no detail"][which]}


@workflow(name=CONTINUED)
async def widget_continued(message: str, turn: int = 1) -> Any:
    """A conversation no one run holds: each answer but "bye" hands over to a fresh run
    (continue_as_new), which the visitor's session follows."""
    topic = await ask("topic", f"Turn {turn}: what next?", {"type": "string", "minLength": 1})
    if topic == "bye":
        await say("bye", f"Goodbye after {turn} turns.")
        return {"reply": "bye"}
    await say("noted", f"Noted: {topic}")
    continue_as_new(message, turn + 1)
