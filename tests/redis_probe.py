"""Not collected on its own (no ``test_`` file name): ``tests/test_own_redis.py`` runs it
in a pytest session of its own to see which Redis that session's tests are given."""

from __future__ import annotations

import os

import orjson
import redis


def test_probe(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.dbsize() == 0  # every test starts on an empty database
        client.set("probe", "written by the probe")  # the fixture flushes it afterwards
        server = client.info("server")
    finally:
        client.close()
    pid = int(server["process_id"])
    with open(f"/proc/{pid}/stat") as stat:  # the field after "(comm)" state is the ppid
        parent = int(stat.read().rsplit(")", 1)[1].split()[1])
    report = {"url": redis_url, "pytest_pid": os.getpid(), "server_pid": pid,
              "server_parent": parent, "port": int(server["tcp_port"])}  # fmt: skip
    print("PROBE " + orjson.dumps(report).decode())
