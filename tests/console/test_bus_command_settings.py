"""``manage.py bus`` reads DLQs by the console's own setting: ``BUSCONSOLE_DLQ_PATTERNS`` is handed to the
bus's command line, which reads no console variable itself (its own is ``$EVENTBUS_DLQ_PATTERNS``)."""

from __future__ import annotations

import json

import pytest
import redis
from django.core.management import CommandError, call_command

PATTERN = [{"name": "jobs-dead", "match": "jobs:*:dead", "target": "strip_suffix::dead",
            "error_field": "reason", "retries_field": "attempts"}]  # fmt: skip


def _bus(capsys, *argv: str) -> dict:
    """The JSON document ``manage.py bus`` printed (exit status 1, nothing found, prints one too)."""
    capsys.readouterr()
    try:
        call_command("bus", *argv, "--json")
    except CommandError as exc:
        assert exc.returncode == 1
    return json.loads(capsys.readouterr().out)


@pytest.mark.django_db
def test_the_consoles_setting_reaches_the_command_line(
    r: redis.Redis, settings, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVENTBUS_DLQ_PATTERNS", raising=False)
    monkeypatch.delenv("BUSCONSOLE_DLQ_PATTERNS", raising=False)
    r.xadd("jobs:resize:dead", {"job": "7", "reason": "too big", "attempts": "2"})
    settings.BUSCONSOLE_DLQ_PATTERNS = ""
    assert _bus(capsys, "dlq")["dlqs"] == []  # no convention claims the key

    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(PATTERN)
    [entry] = _bus(capsys, "dlq", "jobs:resize:dead")["entries"]
    assert (entry["convention"], entry["original_stream"], entry["error"], entry["retries"]) == (
        "jobs-dead", "jobs:resize", "too big", 2,
    )  # fmt: skip
    # the bus's own variable is for python -m eventbus: the console's setting wins under manage.py
    monkeypatch.setenv("EVENTBUS_DLQ_PATTERNS", "[]")
    assert [row["key"] for row in _bus(capsys, "dlq")["dlqs"]] == ["jobs:resize:dead"]
    # an option given on the command line wins over both, as it does for python -m eventbus
    assert _bus(capsys, "dlq", "--dlq-patterns", "[]")["dlqs"] == []
