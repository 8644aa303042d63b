"""Helpers for the interop tests: an event loop on a helper thread for the async libraries, and
reads of the console's API and pages compared with what Redis itself says.

``assert_console_matches_redis`` builds its expected values from redis-py's own parsing of XINFO
STREAM, XINFO GROUPS and XPENDING, never from the console's code; the other helpers only fetch and
pick out fields. Addresses come from ``tests.console.helpers``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import threading
from collections.abc import Coroutine
from typing import Any

import redis
from django.test import Client

from tests.console.helpers import seg, stream_api

XSS = "<img src=x onerror=alert('xss')>"  # no double quote: JSON would show it as \"
WAIT = 20.0  # seconds: a generous bound for a library to do a few milliseconds of work


class LoopThread:
    """An asyncio event loop on a daemon thread, for the async libraries."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="interop-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
        """Run ``coro`` on the loop and wait (bounded) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Start ``coro`` on the loop; returns its concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.run(cancel_all(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


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
