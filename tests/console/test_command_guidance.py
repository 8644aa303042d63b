"""``manage.py`` commands when a Redis is not where they look: one line naming the URL (password masked)
and the variable that sets it, a non-zero exit, no traceback; and ``--help`` in plain text with examples."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.servers import REPO, free_port


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k != "BUS_REDIS_URLS"}
    environment = {**inherited, "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 69, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args", [["export_history"], ["export_history", "--conn", "default"], ["run_pipeline"]]
)
@pytest.mark.slow
def test_monitored_redis_absent(args: list[str]) -> None:
    port = free_port()
    line = _one_line(_manage(*args, BUS_REDIS_URL=f"redis://:pw-1234@127.0.0.1:{port}/0"))
    assert line == (
        f"CommandError: cannot reach Redis at redis://:***@127.0.0.1:{port}/0 (BUS_REDIS_URL): Connection refused"
        " — start Redis or set BUS_REDIS_URL"
    )


@pytest.mark.slow
def test_several_servers_name_their_variable() -> None:
    port = free_port()
    line = _one_line(_manage("export_history", BUS_REDIS_URLS=f"main=redis://ops:pw-1234@127.0.0.1:{port}/2"))
    assert line == (
        f"CommandError: cannot reach Redis at redis://ops:***@127.0.0.1:{port}/2 (BUS_REDIS_URLS): Connection refused"
        " — start Redis or set BUS_REDIS_URLS"
    )


@pytest.mark.slow
def test_the_broker_absent_is_the_console_redis() -> None:
    port = free_port()
    line = _one_line(_manage("run_pipeline", "--job", REDIS_URL=f"redis://127.0.0.1:{port}/1"))
    assert line == (
        f"CommandError: cannot reach Redis at redis://127.0.0.1:{port}/1 (REDIS_URL): Connection refused"
        " — start Redis or set REDIS_URL"
    )


@pytest.mark.parametrize(
    "command", ["export_history", "run_pipeline", "console_token", "ensure_admin", "ensure_alert_rules"]
)
def test_help_is_plain_text_with_examples_and_variables(command: str) -> None:
    done = _manage(command, "--help")
    assert done.returncode == 0
    assert "examples:" in done.stdout and "environment:" in done.stdout
    for markup in ("``", "`", ":func:", ":mod:", "**"):
        assert markup not in done.stdout


def test_a_failure_is_placed_even_when_a_url_names_several_sentinels(settings) -> None:
    """A Sentinel URL names several hosts: it has no one address to compare, and must not raise."""
    import redis as redis_py

    from streams_app.management.commands._cli import _where

    settings.REDIS_URL = "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/console/1"
    settings.BUS_REDIS_URLS = {"default": "redis+sentinel://127.0.0.1:26381,127.0.0.1:26382/bus/0"}
    error = redis_py.ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")
    assert _where(error) == (settings.REDIS_URL, "REDIS_URL")
