"""``python -m eventbus`` when Redis is not where it looks: one line naming the URL (password masked)
and what sets it, a non-zero exit, no traceback; and a ``--help`` that is plain text with examples."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.servers import REPO, free_port


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [sys.executable, "-m", "eventbus", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 69, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args", [["publish", "orders", "order.created", "{}"], ["migrate"], ["migrate", "orders"], ["demo"]]
)
def test_commands_name_the_url_and_the_variable(args: list[str]) -> None:
    port = free_port()
    line = _one_line(_cli(*args, BUS_REDIS_URL=f"redis://:s3cret-pw@127.0.0.1:{port}/0"))
    assert line == (
        f"cannot reach Redis at redis://:***@127.0.0.1:{port}/0 (BUS_REDIS_URL): Connection refused"
        " — start Redis or set BUS_REDIS_URL"
    )
    assert "s3cret-pw" not in line


def test_an_explicit_url_is_named_as_the_option() -> None:
    port = free_port()
    done = _cli("publish", "--url", f"redis://ops:hunter2@127.0.0.1:{port}/3", "orders", "t", "{}")
    line = _one_line(done)
    assert f"redis://ops:***@127.0.0.1:{port}/3 (--url)" in line and "hunter2" not in line


def test_an_unknown_host_says_so() -> None:
    line = _one_line(_cli("publish", "--url", "redis://no-such-host.invalid:6379/0", "orders", "t", "{}"))
    assert line.startswith("cannot reach Redis at redis://no-such-host.invalid:6379/0 (--url): ")
    assert line.endswith("check the host name in --url")


def test_a_wrong_password_is_a_refused_login(redis_server) -> None:
    """The suite's server has no password: AUTH with one is refused, and the password is not shown."""
    url = redis_server.url(0).replace("redis://", "redis://someone:wrong-pw@")
    line = _one_line(_cli("publish", "--url", url, "orders", "t", "{}"))
    assert line.startswith("cannot log in to Redis at redis://someone:***@")
    assert "wrong-pw" not in line and line.endswith("check the user and password in --url")


def test_worker_names_the_bus_it_imported() -> None:
    port = free_port()
    done = _cli(
        "worker", "tests.eventbus.apps:bus", EVENTBUS_TEST_URL=f"redis://127.0.0.1:{port}/0", BUS_REDIS_URL=""
    )
    line = _one_line(done)
    assert line.startswith(
        f"cannot reach Redis at redis://127.0.0.1:{port}/0 (the URL of tests.eventbus.apps:bus)"
    )


@pytest.mark.parametrize("args", [[], ["worker"], ["publish"], ["migrate"], ["demo"]])
def test_help_is_plain_text_with_examples(args: list[str]) -> None:
    done = _cli(*args, "--help")
    assert done.returncode == 0
    assert "examples:" in done.stdout
    for markup in ("``", ":func:", ":mod:", "**"):
        assert markup not in done.stdout
