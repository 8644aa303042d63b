"""``python -m eventbus`` given a URL that is no Redis URL, or a database the server does not have: one line
that says what is wrong and with which setting, exit 2 (bad arguments), no traceback. And the options every
screen command takes (``--url``, ``--json``, ``--dlq-patterns``, ``--log-level``) go before or after the
command alike.

Run as a user runs it, in a subprocess, against the suite's real redis-server (16 databases). What is
listed is compared with what Redis holds, read here with redis-py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from tests.servers import REPO, RedisServer


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "BUS_REDIS_URL": "", **env}
    return subprocess.run(
        [sys.executable, "-m", "eventbus", *args], cwd=REPO, env=environment, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess[str], status: int = 2) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == status, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def bad_urls(server: RedisServer) -> dict[str, str]:
    """Each bad URL, and a word its line must hold."""
    port = server.port
    return {
        f"http://127.0.0.1:{port}/0": "redis://",
        "notaurl": "redis://",
        f"redis://127.0.0.1:{port}/99": "99",
        f"redis://127.0.0.1:{port}/abc": "abc",
        "redis://127.0.0.1:notaport/0": "notaport",
        f"redis://127.0.0.1:{port}/0?cluster=maybe": "cluster",
    }


COMMANDS = [["list"], ["inspect", "orders"], ["stats"], ["publish", "orders", "t", "{}"], ["migrate"]]


# Sixty CLI processes in all: the inner loop (make test-fast) runs the first command, make test every one.
@pytest.mark.parametrize(
    "command", [COMMANDS[0], *(pytest.param(c, marks=pytest.mark.slow) for c in COMMANDS[1:])], ids=lambda c: c[0]
)
def test_a_bad_url_is_one_line_and_exit_2(redis_server: RedisServer, r: redis.Redis, command: list[str]) -> None:
    for url, word in bad_urls(redis_server).items():
        after = one_line(cli(*command, "--url", url))
        assert "--url" in after and word in after, after
        before = one_line(cli("--url", url, *command))
        assert before == after
    assert r.dbsize() == 0  # nothing was written anywhere (publish included)


def test_a_bad_url_in_the_variable_names_the_variable(redis_server: RedisServer) -> None:
    line = one_line(cli("list", BUS_REDIS_URL=f"redis://127.0.0.1:{redis_server.port}/99"))
    assert "BUS_REDIS_URL" in line and "99" in line and "16" in line, line


def test_the_password_of_a_bad_url_is_not_shown(redis_server: RedisServer) -> None:
    line = one_line(cli("list", "--url", f"redis://ops:hunter2@127.0.0.1:{redis_server.port}/orders"))
    assert "hunter2" not in line and "ops:***@" in line


@pytest.fixture
def streams(r: redis.Redis) -> list[str]:
    r.xadd("orders", {"type": "order.created"})
    r.xadd("payments", {"type": "payment.taken"})
    r.xadd("{orders}:dlq", {"error": "boom"})
    return sorted(k.decode() for k in r.scan_iter(_type="stream"))


def listed(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return sorted(row["key"] for row in json.loads(done.stdout)["streams"])


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--url", "{url}", "--json"],
        ["--url", "{url}", "list", "--json"],
        ["--url", "{url}", "--json", "list"],
        ["--json", "list", "--url", "{url}"],
        ["--log-level", "WARNING", "--url", "{url}", "list", "--json"],
        ["list", "--json", "--url", "{url}", "--log-level", "WARNING"],
        ["--url", "redis://127.0.0.1:1/0", "list", "--url", "{url}", "--json"],  # the later one counts
    ],
    ids=lambda a: " ".join(a),
)
def test_global_options_go_before_or_after_the_command(
    redis_server: RedisServer, streams: list[str], argv: list[str]
) -> None:
    url = redis_server.url(0)
    assert listed(cli(*(a.replace("{url}", url) for a in argv))) == streams


def test_dlq_patterns_before_the_command(redis_server: RedisServer, r: redis.Redis) -> None:
    r.xadd("orders", {"type": "t"})
    r.xadd("dead.orders", {"error": "boom"})
    patterns = json.dumps([{"name": "dead-dot", "match": "dead.*", "target": "strip_prefix:dead."}])
    url = redis_server.url(0)
    after = cli("dlq", "--url", url, "--json", "--dlq-patterns", patterns)
    before = cli("--dlq-patterns", patterns, "--url", url, "--json", "dlq")
    assert after.returncode == before.returncode == 0, (after.stderr, before.stderr)
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert [row["key"] for row in json.loads(before.stdout)["dlqs"]] == ["dead.orders"]


def test_an_option_the_command_does_not_take_is_refused_before_it_too() -> None:
    done = cli("--json", "publish", "orders", "t", "{}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--json" in done.stderr and "publish" in done.stderr
