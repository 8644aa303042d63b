"""``python -m eventbus journey``: the journey of one event with Redis alone.

The scenario (:mod:`tests.journey_scenario`) runs through the real bus on the suite's redis-server; the
operator's requeue is the bus's own command line here (the console's, with its audit row, is
``tests/console/journey``). Expected values come from XRANGE of the stream.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import redis

from eventbus.__main__ import main
from tests import journey_scenario as scenario
from tests.servers import REPO


@pytest.fixture
def ran(url: str, r: redis.Redis) -> scenario.Expected:
    def requeue(dlq: str, dlq_id: str) -> None:
        assert main(["requeue", dlq, "--ids", dlq_id, "--url", url]) == 0

    return scenario.run(url, r, requeue)


def journey(capsys, url: str, *argv: str) -> tuple[int, dict]:
    status = main(["journey", *argv, "--stream", scenario.STREAM, "--url", url, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_the_journey_from_event_id_entry_id_and_expression(ran: scenario.Expected, url: str, capsys) -> None:
    for start in (ran.event_id, ran.first, "data.order_id == 7"):
        status, doc = journey(capsys, url, start)
        assert status == 0, doc
        assert doc["event_id"] == ran.event_id and doc["first_id"] == ran.first
        scenario.check_steps(doc["steps"], ran)
        assert doc["coverage"]["complete"] and doc["coverage"]["entries_read"] <= doc["coverage"]["entries_total"]
        assert any("Operator actions" in note for note in doc["notes"])  # not in Redis: said so
    status, doc = journey(capsys, url, "data.order_id == 6")
    assert [(s["kind"], s.get("group"), s.get("state")) for s in doc["steps"]] == [
        ("publish", None, None), ("delivery", "billing", "acked"), ("delivery", "ledger", "acked")]  # fmt: skip


def test_as_a_shell_runs_it_without_django(ran: scenario.Expected, url: str) -> None:
    """A table for a human, from a process that never imports Django."""
    code = ("import sys; from eventbus.__main__ import main; s = main(sys.argv[1:]); "
            "assert 'django' not in sys.modules; sys.exit(s)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, "journey", ran.first, "--stream", "orders", "--url", url],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"published to orders as {ran.first}" in lines[1]
    assert any(f"dead-lettered to {{orders}}:dlq as {ran.dead}" in line for line in lines)
    assert any(line.startswith("looked at ") for line in lines)


def test_bad_starts_are_exit_2(url: str, r: redis.Redis, capsys) -> None:
    r.xadd("orders", {"type": "t"})
    assert main(["journey", "1-1", "--stream", "orders", "--stream", "more", "--url", url]) == 2
    assert main(["journey", "x", "--stream", "nothing", "--url", url]) == 2
    assert main(["journey", "data.n ==", "--stream", "orders", "--url", url]) == 2
    assert main(["journey", "9-9", "--stream", "orders", "--url", url]) == 1  # no such entry: nothing found
