"""Helpers for the interop tests: the library scripts run in ``.venv-interop`` (:class:`LibraryProcess`),
and reads of the console's API and pages compared with what Redis itself says.

The libraries never load in this process: each test starts its library's script
(``clients/<library>_side.py``) in the interop venv (``scripts/interop_env.py``), pointed at the test's
redis-server, and reads what it did (task IDs, what its handlers saw, its own parser's readings) as
JSON lines; a script that waits for the test (a worker holding a task) waits for a word on its stdin.

``assert_console_matches_redis`` builds its expected values from redis-py's own parsing of XINFO
STREAM, XINFO GROUPS and XPENDING, never from the console's code; the other helpers only fetch and
pick out fields. Addresses come from ``tests.console.helpers``.
"""

from __future__ import annotations

import html
import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import redis
from django.test import Client

from tests.console.helpers import seg, stream_api

XSS = "<img src=x onerror=alert('xss')>"  # no double quote: JSON would show it as \"
WAIT = 20.0  # seconds: a generous bound for a library to do a few milliseconds of work


CLIENTS = Path(__file__).resolve().parent / "clients"


class LibraryProcess:
    """One library script (``clients/<script>``) running a scenario in the interop venv.

    ``read`` returns its next JSON line, ``say`` writes a word to its stdin, ``finish`` waits for it to
    exit 0. Every wait is bounded; a script that fails or exits early fails the test with its stderr.
    """

    def __init__(self, python: Path, script: str, scenario: str, url: str, *, cwd: Path,
                 env: dict[str, str] | None = None, **arguments: Any) -> None:
        self.name = f"{script} {scenario}"
        self.process = subprocess.Popen(
            [str(python), str(CLIENTS / script), scenario, url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        self.say(json.dumps(arguments))  # the arguments: the first line of its stdin
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr), daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _failure(self, what: str) -> AssertionError:
        return AssertionError(f"{self.name}: {what}; its stderr:\n{''.join(self._stderr)[-4000:]}")

    def read(self, timeout: float = 60) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise self._failure(f"no line within {timeout} s") from None
        if line is None:
            self.process.wait(10)
            raise self._failure(f"exited ({self.process.returncode}) before writing a line")
        return json.loads(line)

    def say(self, word: str) -> None:
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()

    def finish(self, timeout: float = 60) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise self._failure(f"still running after {timeout} s") from None
        if self.process.returncode != 0:
            raise self._failure(f"exited {self.process.returncode}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def get_json(client: Client, path: str) -> Any:
    response = client.get(path)
    assert response.status_code == 200, (path, response.content[:500])
    return response.json()


def get_html(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.content[:500])
    return response.content.decode()


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def entries_asc(client: Client, key: str) -> list[dict]:
    return get_json(client, stream_api(key, "entries/?order=asc&count=1000"))["entries"]


def decoded_field(entry: dict, name: str) -> dict:
    [field] = [f for f in entry["decoded"] if f["name"] == name]
    return field


def assert_console_matches_redis(client: Client, r: redis.Redis, key: str, *, is_dlq: bool = False) -> dict:
    """The stream's row in the streams list, its info and each group's pending entries, against Redis.

    Returns the stream-info body.
    """
    info = r.xinfo_stream(key)
    groups = r.xinfo_groups(key)
    first, last = info["first-entry"], info["last-entry"]
    expected_groups = [
        {
            "name": g["name"].decode(),
            "consumers": g["consumers"],
            "pending": g["pending"],
            "last_delivered_id": g["last-delivered-id"].decode(),
            "entries_read": g["entries-read"],
            "lag": g["lag"],
        }
        for g in groups
    ]
    expected = {
        "key": key,
        "length": info["length"],
        "first_id": text(first[0]) if first else None,
        "last_id": text(last[0]) if last else None,
        "last_generated_id": text(info["last-generated-id"]),
        "entries_added": info["entries-added"],
        "is_dlq": is_dlq,
        "groups": expected_groups,
    }
    body = get_json(client, stream_api(key))
    assert {name: body[name] for name in expected} == expected

    rows = get_json(client, f"/api/v1/c/default/streams/?match={seg(key)}&count=1000")["streams"]
    assert [
        {name: row[name] for name in ("key", "length", "first_id", "last_id", "groups", "pending", "is_dlq")}
        for row in rows
    ] == [
        {
            "key": key,
            "length": info["length"],
            "first_id": expected["first_id"],
            "last_id": expected["last_id"],
            "groups": len(groups),
            "pending": sum(g["pending"] for g in groups),
            "is_dlq": is_dlq,
        }
    ]

    for g in groups:
        name = g["name"].decode()
        summary = r.xpending(key, name)
        rows = r.xpending_range(key, name, min="-", max="+", count=1000)
        pending = get_json(client, stream_api(key, f"groups/{seg(name)}/pending/?count=1000"))
        longest = pending["summary"].pop("longest_idle")
        if summary["pending"] == 0:
            assert longest is None
        else:  # the idlest of the pending list (tests/console/redis_ops/test_pending_idle.py checks the figure)
            pending_ids = {row["message_id"].decode() for row in rows}
            pending_ids |= {row["message_id"].decode() for row in r.xpending_range(key, name, "-", "+", 1000)}
            assert longest["id"] in pending_ids
            assert isinstance(longest["idle_ms"], int) and longest["idle_ms"] >= 0
        assert pending["summary"] == {
            "count": summary["pending"],
            "min_id": text(summary["min"]),
            "max_id": text(summary["max"]),
            "consumers": {c["name"].decode(): c["pending"] for c in summary["consumers"]},
        }
        assert [(e["id"], e["consumer"], e["deliveries"], e["exists"]) for e in pending["entries"]] == [
            (
                row["message_id"].decode(),
                row["consumer"].decode(),
                row["times_delivered"],
                bool(r.xrange(key, row["message_id"], row["message_id"])),
            )
            for row in rows
        ]
        assert all(isinstance(e["idle_ms"], int) and e["idle_ms"] >= 0 for e in pending["entries"])
    return body


def assert_escaped(body: str, payload: str) -> None:
    """``payload`` shows on the page, escaped, and never raw."""
    assert html.escape(payload) in body
    assert payload not in body


def redis_streams(r: redis.Redis, match: str = "*") -> set[str]:
    return {key.decode() for key in r.scan_iter(match=match, _type="stream", count=1000)}


def console_streams(client: Client, match: str = "*") -> dict[str, dict]:
    rows = get_json(client, f"/api/v1/c/default/streams/?match={seg(match)}&count=1000")["streams"]
    return {row["key"]: row for row in rows}
