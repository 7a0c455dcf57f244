"""The answer-link signer (runtime.links) and answered_by in resume_hook."""

from __future__ import annotations

import string

import pytest

from runtime import InvalidLink, Runtime, UsageError, Worker
from runtime.links import LinkSigner
from runtime.settings import Settings

TOKEN = "r-" + "a" * 24 + ":h0.approval"
OTHER = "r-" + "b" * 24 + ":h0.approval"


def test_sign_and_verify_round_trip() -> None:
    signer = LinkSigner([("k1", "s" * 16)])
    link = signer.sign(TOKEN, expires_at_ms=2**41, who="bob")
    verified = signer.verify(link)
    assert (verified.token, verified.key_id, verified.who) == (TOKEN, "k1", "bob")
    assert verified.answered_by == "link:k1:bob"
    assert signer.verify(signer.sign(TOKEN)).answered_by == "link:k1"


def test_links_of_one_hook_do_not_verify_for_another_or_another_secret() -> None:
    link = LinkSigner([("k1", "s" * 16)]).sign(TOKEN)
    with pytest.raises(InvalidLink) as exc:
        LinkSigner([("k1", "t" * 16)]).verify(link)  # same key id, another secret
    assert exc.value.reason == "bad_signature"
    other = LinkSigner([("k1", "s" * 16)]).sign(OTHER)
    spliced = ".".join(link.split(".")[:3] + other.split(".")[3:])
    with pytest.raises(InvalidLink) as exc:
        LinkSigner([("k1", "s" * 16)]).verify(spliced)
    assert exc.value.reason == "bad_signature"


def test_a_signature_altered_to_decode_the_same_does_not_verify() -> None:
    """A lenient base64 decoder skips characters outside the alphabet and the last
    character's two unused bits: each of these texts decodes to the right signature."""
    signer = LinkSigner([("k1", "s" * 16)])
    link = signer.sign(TOKEN)
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    last = alphabet[alphabet.index(link[-1]) ^ 1]  # another value in the unused bits only
    altered = {
        "appended": (link + "@@", "malformed"),
        "padded": (link + "=", "malformed"),
        "a newline": (link + "\n", "malformed"),
        "inside": (link[:-10] + "!" + link[-10:], "malformed"),
        "last bits": (link[:-1] + last, "bad_signature"),
    }
    for how, (text, reason) in altered.items():
        with pytest.raises(InvalidLink) as exc:
            signer.verify(text)
        assert exc.value.reason == reason, how
    assert signer.verify(link).token == TOKEN


def test_rotation_first_key_signs_all_verify() -> None:
    old = LinkSigner([("k1", "s" * 16)]).sign(TOKEN)
    rotated = LinkSigner([("k2", "u" * 16), ("k1", "s" * 16)])
    assert rotated.verify(old).key_id == "k1"
    assert rotated.sign(TOKEN).startswith("v1.k2.")
    with pytest.raises(InvalidLink) as exc:
        LinkSigner([("k2", "u" * 16)]).verify(old)
    assert exc.value.reason == "unknown_key"


def test_expiry_and_bad_configuration() -> None:
    signer = LinkSigner([("k1", "s" * 16)])
    link = signer.sign(TOKEN, expires_at_ms=1000)
    assert signer.verify(link, now=999).token == TOKEN
    with pytest.raises(InvalidLink) as exc:
        signer.verify(link, now=1000)
    assert (exc.value.reason, exc.value.run_id) == ("expired", TOKEN.split(":")[0])
    for keys in ([], [("k1", "short")], [("bad id!", "s" * 16)], [("a", "s" * 16)] * 2):
        with pytest.raises(UsageError):
            LinkSigner(keys)


def test_link_keys_come_from_the_environment() -> None:
    settings = Settings.from_env({"PARLEY_LINK_KEYS": "k2=xx,k1=yy", "PARLEY_PUBLIC_URL": "h/"})
    assert settings.link_keys == (("k2", "xx"), ("k1", "yy"))
    assert settings.public_url == "h"
    with pytest.raises(ValueError, match="item 1") as exc:
        Settings.from_env({"PARLEY_LINK_KEYS": "nosecret"})
    assert "nosecret" not in str(exc.value)


async def test_answered_by_is_recorded_in_hook_received(rt: Runtime, worker: Worker) -> None:
    import asyncio

    from runtime import hook, workflow

    @workflow(name="links_answered_by")
    async def answered_by_wf() -> object:
        return await hook("ok")

    run_id = await rt.start(answered_by_wf)
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(500):
            hooks = await rt.list_hooks(run_id=run_id)
            if hooks:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(UsageError):
            await rt.resume_hook(hooks[0].token, 1, answered_by="")
        assert await rt.resume_hook(hooks[0].token, 1, answered_by="key:ops")
        assert await rt.wait(run_id, timeout=10) == 1
    finally:
        worker.stop()
        await task
    [received] = [e for e in await rt.events(run_id) if e.type == "hook.received"]
    assert received.data == {"hook_id": "h0.ok", "payload": 1, "answered_by": "key:ops"}


def test_a_link_key_id_ending_in_a_newline_is_refused() -> None:
    """``^...$`` with ``match`` took "k1\\n" (``$`` matches before a final newline)."""
    with pytest.raises(UsageError, match="a link key id must match"):
        LinkSigner([("k1\n", "s" * 32)])
