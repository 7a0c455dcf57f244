"""A workflow for the answer page's browser tests: one question whose schema the browser
cannot check (a pattern), answered through a signed link."""

from __future__ import annotations

from typing import Any

from runtime import hook, workflow

POSTCODE = "answer_page_postcode"
QUESTION = "Your postcode (5 digits)?"


@workflow(name=POSTCODE)
async def answer_page_postcode() -> Any:
    return await hook(
        "postcode",
        timeout="10m",
        prompt=QUESTION,
        schema={"type": "string", "pattern": "^[0-9]{5}$"},
    )
