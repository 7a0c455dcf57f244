"""What the README tells an operator to type works against the demo."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import jsonschema
import orjson

from examples.support_agent import answer_schema
from examples.support_agent.model import PRODUCTS

README = (Path(__file__).resolve().parent.parent.parent / "README.md").read_text()


def test_the_hooks_resume_example_answers_the_demos_question() -> None:
    [line] = [m for m in re.findall(r"^parley hooks resume .*$", README, re.M)]
    args = shlex.split(line.split("#")[0])
    payload = orjson.loads(args[args.index("--payload") + 1])
    schema = answer_schema({"question": "Which product are you using?", "choices": PRODUCTS})
    jsonschema.validate(payload, schema)


def test_the_chat_settings_are_documented() -> None:
    for name in ("PARLEY_CHAT_WORKFLOW", "PARLEY_CHAT_WORKFLOWS", "PARLEY_ALLOWED_ORIGINS"):
        assert f"| `{name}` |" in README, name
