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


# Where the commands look with no --url: $BUS_REDIS_URL, else db 0 of the private server `make run` starts
# on $EVENTBUS_REDIS_PORT (6390 when unset), as the console does. An empty variable counts as unset.


def test_with_nothing_set_the_help_names_the_private_port() -> None:
    """The port is written here, not read from the code under test: 6390 is what ``make run`` documents."""
    done = _cli("list", "--help", BUS_REDIS_URL="", EVENTBUS_REDIS_PORT="")
    assert "redis://127.0.0.1:$EVENTBUS_REDIS_PORT/0, port 6390 when unset" in " ".join(done.stdout.split())


def test_the_port_variable_moves_the_default(redis_server, r) -> None:
    done = _cli(
        "publish", "orders", "t", "{}", BUS_REDIS_URL="", EVENTBUS_REDIS_PORT=str(redis_server.port)
    )
    assert done.returncode == 0, done.stderr
    assert [entry_id.decode() for entry_id, _ in r.xrange("orders")] == [done.stdout.strip()]


def test_bus_redis_url_and_url_win_over_the_port(redis_server, r) -> None:
    absent = str(free_port())
    done = _cli(
        "publish", "orders", "t", "{}", BUS_REDIS_URL=redis_server.url(0), EVENTBUS_REDIS_PORT=absent
    )
    assert done.returncode == 0, done.stderr
    done = _cli(
        "publish", "--url", redis_server.url(0), "orders", "t", "{}",
        BUS_REDIS_URL=f"redis://127.0.0.1:{absent}/0", EVENTBUS_REDIS_PORT=absent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert r.xlen("orders") == 2


def test_an_absent_server_at_the_port_names_the_variable() -> None:
    port = free_port()
    line = _one_line(_cli("list", BUS_REDIS_URL="", EVENTBUS_REDIS_PORT=str(port)))
    assert line == (
        f"cannot reach Redis at redis://127.0.0.1:{port}/0 (EVENTBUS_REDIS_PORT): Connection refused"
        " — start it (make run), or set BUS_REDIS_URL or pass --url"
    )


def test_a_port_that_is_no_port_is_one_line_and_status_2() -> None:
    done = _cli("list", BUS_REDIS_URL="", EVENTBUS_REDIS_PORT="63 90")
    assert done.returncode == 2
    assert done.stderr.strip() == "EVENTBUS_REDIS_PORT must be a port number, not '63 90'"
