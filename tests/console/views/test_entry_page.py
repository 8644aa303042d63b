"""The entry page: the groups that have the entry pending, copy buttons, human times.

Expected values come from Redis itself (XPENDING as the test sends it) or from plain Python
(``datetime.fromtimestamp``), never from the console's own helpers.
"""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime

import pytest
import redis
from django.test import Client

from tests.console.helpers import dlq_url, stream_url


def _pending_rows(body: str) -> dict[str, tuple[str, str, str]]:
    """``{group: (consumer, idle ms, deliveries)}`` as the page's pending table shows them."""
    section = body.split('id="entry-pending"', 1)[1].split("</section>", 1)[0]
    rows = re.findall(
        r'<tr data-group="([^"]*)">.*?<td class="mono">([^<]*)</td>\s*<td class="num" title="[^"]*" '
        r'data-idle-ms="(\d+)">.*?<td class="num">(\d+)</td>',
        section,
        re.S,
    )
    return {html.unescape(g): (html.unescape(c), idle, n) for g, c, idle, n in rows}


def _xpending(r: redis.Redis, key: str, groups: list[str], entry_id: str) -> dict[str, tuple[str, int]]:
    """``{group: (consumer, deliveries)}`` for each group whose XPENDING lists ``entry_id``."""
    found = {}
    for group in groups:
        for row in r.xpending_range(key, group, min=entry_id, max=entry_id, count=1):
            found[group] = (row["consumer"].decode(), int(row["times_delivered"]))
    return found


def test_the_entry_page_lists_the_groups_that_have_it_pending(viewer_client: Client, r: redis.Redis) -> None:
    ids = [r.xadd("orders", {"n": str(i)}).decode() for i in range(4)]
    groups = ["billing", "shipping", "audit <b>"]
    for group in groups:
        r.xgroup_create("orders", group, id="0")  # "audit <b>" reads nothing: nothing is pending there
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=2)
    r.xreadgroup("shipping", "w<2>", {"orders": ">"}, count=4)
    r.xclaim("orders", "shipping", "w<2>", 0, [ids[1]])  # a second delivery
    r.xack("orders", "billing", ids[0])

    for entry_id in ids:
        body = viewer_client.get(stream_url("orders", f"entries/{entry_id}/")).content.decode()
        shown = {g: (c, int(n)) for g, (c, _, n) in _pending_rows(body).items()}
        assert shown == _xpending(r, "orders", groups, entry_id), entry_id
    assert _xpending(r, "orders", groups, ids[1]) == {"billing": ("worker-1", 1), "shipping": ("w<2>", 2)}
    assert set(_xpending(r, "orders", groups, ids[0])) == {"shipping"}
    body = viewer_client.get(stream_url("orders", f"entries/{ids[1]}/")).content.decode()
    assert "w<2>" not in body and "w&lt;2&gt;" in body  # names are escaped


def test_an_entry_of_a_stream_without_groups_says_so(viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("plain", {"a": "1"}).decode()
    body = viewer_client.get(stream_url("plain", f"entries/{entry_id}/")).content.decode()
    assert "This stream has no consumer groups." in body
    assert _pending_rows(body) == {}


def test_idle_times_are_those_redis_reports(viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", {"n": "1"}).decode()
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=1)
    r.xclaim("orders", "billing", "worker-1", 0, [entry_id], idle=600_000, justid=True)  # idle 10 min
    before = r.xpending_range("orders", "billing", min=entry_id, max=entry_id, count=1)[0][
        "time_since_delivered"
    ]
    body = viewer_client.get(stream_url("orders", f"entries/{entry_id}/")).content.decode()
    after = r.xpending_range("orders", "billing", min=entry_id, max=entry_id, count=1)[0][
        "time_since_delivered"
    ]
    idle = int(_pending_rows(body)["billing"][1])
    assert before <= idle <= after
    assert idle >= 600_000


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


@pytest.mark.parametrize(
    ("name", "value", "seconds"),
    [
        ("ts", "1714557600123", 1714557600.123),  # the event bus's ms
        ("failed_at", "1714557600.5", 1714557600.5),  # OmniDaemon's float seconds
        ("timestamp", "1714557600", 1714557600),
        ("created_at", "2024-05-01T10:00:00Z", datetime(2024, 5, 1, 10, tzinfo=UTC).timestamp()),
    ],
)
def test_timestamp_fields_show_their_utc_time(
    viewer_client: Client, r: redis.Redis, name, value, seconds
) -> None:
    entry_id = r.xadd("orders", {name: value, "amount": "1714557600123"}).decode()
    body = viewer_client.get(stream_url("orders", f"entries/{entry_id}/")).content.decode()
    times = re.findall(r'<time class="small muted field-time"[^>]*>([^<]*)</time>', body)
    assert times == [_utc(seconds)]  # the amount, a number that is no timestamp field, gets none


def test_numbers_out_of_range_are_not_times(viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", {"ts": "42", "time": "soon", "updated_at": "99999999999999999"}).decode()
    body = viewer_client.get(stream_url("orders", f"entries/{entry_id}/")).content.decode()
    assert "field-time" not in body


def test_copy_buttons_carry_the_id_and_the_payload(viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", {"type": "order.created", "data": '{"note": "<b>hi</b>"}'}).decode()
    body = viewer_client.get(stream_url("orders", f"entries/{entry_id}/")).content.decode()
    assert 'data-copy="entry-id"' in body and 'data-copy="entry-payload"' in body
    assert re.search(rf'<span id="entry-id">{entry_id}</span>', body)
    payload = re.search(r'<pre id="entry-payload" hidden>(.*?)</pre>', body, re.S).group(1)
    assert "<b>" not in payload
    assert json.loads(html.unescape(payload)) == {"type": "order.created", "data": '{"note": "<b>hi</b>"}'}
    assert "/static/js/copy.js" in body
    assert "onclick" not in body


def test_the_entry_page_of_a_dlq_links_to_the_dead_letter_view(viewer_client: Client, r: redis.Redis) -> None:
    dead = r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_error": "boom", "n": "1"}).decode()
    plain = r.xadd("orders", {"n": "1"}).decode()
    body = viewer_client.get(stream_url("orders:dlq", f"entries/{dead}/")).content.decode()
    assert f'href="{dlq_url("orders:dlq")}entries/{dead}/"' in body
    body = viewer_client.get(stream_url("orders", f"entries/{plain}/")).content.decode()
    assert "dead-letter-link" not in body
