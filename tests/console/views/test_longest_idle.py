"""The longest pending idle time where a person and a script read it: the group page's facts and the
API's pending summary, against what XPENDING reports over the whole PEL (read around the request).

PELs are shaped with ``XCLAIM ... IDLE`` (``tests/console/redis_ops/pel.py``); the lower-bound case
lowers the walk limit rather than filling Redis with 20,000 entries.
"""

from __future__ import annotations

import html
import re

import pytest
import redis
from django.test import Client

from streams_app.redis_ops import pending_idle
from tests.console.helpers import group_url, stream_api
from tests.console.redis_ops.pel import FRESH, measured, pel, pel_max

MIN = 60_000


def fact(body: str) -> str:
    """The text of the page's "Longest pending idle" fact, tags stripped."""
    found = re.search(r'<div id="longest-idle">(.*?)</div>', body, re.S)
    assert found, "no longest-idle fact on the page"
    return html.unescape(re.sub(r"<[^>]+>", " ", found.group(1)))


def test_group_page_shows_the_longest_idle_entry_not_the_lowest_id(
    viewer_client: Client, r: redis.Redis
) -> None:
    idles: list[int | None] = [FRESH] + [MIN + i * 1_000 for i in range(1, 40)]
    idles[33] = 9 * MIN + 30_000
    ids = pel(r, "orders", "billing", idles)
    body = viewer_client.get(group_url("orders", "billing")).content.decode()
    text = fact(body)
    assert "Longest pending idle" in text and "9m" in text and "≥" not in text
    assert ids[33] in text and ids[0] not in text
    assert f'href="/c/default/streams/orders/entries/{ids[33]}/"' in body


def test_group_page_marks_a_lower_bound(
    viewer_client: Client, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pending_idle, "SCAN_PENDING_MAX", 2 * pending_idle.PROBE_COUNT)
    pel(r, "orders", "billing", [FRESH] + [MIN] * 29)
    assert "≥ 1m" in fact(viewer_client.get(group_url("orders", "billing")).content.decode())
    r.xgroup_create("orders", "quiet", id="$")
    assert "—" in fact(viewer_client.get(group_url("orders", "quiet")).content.decode())


def test_api_pending_summary_has_the_longest_idle(viewer_client: Client, r: redis.Redis) -> None:
    idles: list[int | None] = [FRESH] + [MIN + i * 1_000 for i in range(1, 25)]
    idles[21] = 12 * MIN
    ids = pel(r, "orders", "billing", idles)
    before = pel_max(r, "orders", "billing")
    response, slack_ms = measured(
        lambda: viewer_client.get(stream_api("orders", "groups/billing/pending/?count=5"))
    )
    longest = response.json()["summary"]["longest_idle"]
    assert longest["id"] == ids[21] == before[1] and longest["exact"] is True
    assert before[0] - slack_ms <= longest["idle_ms"] <= pel_max(r, "orders", "billing")[0]
    r.xack("orders", "billing", *ids)
    assert (
        viewer_client.get(stream_api("orders", "groups/billing/pending/")).json()["summary"]["longest_idle"]
        is None
    )
