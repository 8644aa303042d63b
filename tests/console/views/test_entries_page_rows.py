"""The stream page's entries table, whose rows are built in Python (``{% entry_rows %}``) rather than by
the template engine: every value escaped, the same rows in the page and in its htmx refresh, the ID's
time, the delete checkboxes for admins only, and pager links that keep the page's other parameters.

Expected values come from Redis (XREVRANGE as the test sends it) and from plain Python (``html.escape``,
``datetime.fromtimestamp``), never from the console's own helpers.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit

import pytest
import redis
from django.test import Client

from streams_app.alerts.models import Alert
from streams_app.metrics.models import name_hash
from tests.console.alerts.helpers import Kind, make_rule
from tests.console.helpers import CONN, stream_url

HOSTILE = {
    "type": '<script>alert("t")</script>',
    "data": '{"note": "<img src=x onerror=alert(1)>", "q": "\\"\'&"}',
    "<b>name</b>": "a & b < c",
}


def _rows(body: str) -> list[str]:
    table = body.split('<section id="entries"', 1)[1].split("</section>", 1)[0]
    return re.findall(r"<tr>.*?</tr>", table.split("<tbody>", 1)[1], re.S)


def _tbody(body: str) -> str:
    return body.split('<section id="entries"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]


def test_every_value_of_a_row_is_escaped(viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", HOSTILE).decode()
    body = viewer_client.get(stream_url("orders")).content.decode()
    tbody = _tbody(body)
    for name in HOSTILE:
        assert f'<dt class="mono">{html.escape(name)} ' in tbody, name
    assert "<script>" not in tbody and "<img" not in tbody and "<b>name" not in tbody
    # The JSON value is pretty-printed in its <pre>: its strings are there escaped, quotes included.
    pres = re.findall(r'<pre class="payload" id="field-' + entry_id + r'-(\d)">(.*?)</pre>', tbody, re.S)
    assert [int(i) for i, _ in pres] == [0, 1, 2]
    assert html.escape("<img src=x onerror=alert(1)>") in pres[1][1]
    assert (
        html.unescape(pres[0][1]) == HOSTILE["type"] and html.unescape(pres[2][1]) == HOSTILE["<b>name</b>"]
    )
    summary = re.search(r'<summary class="mono small">(.*?)</summary>', tbody, re.S).group(1)
    assert html.unescape(summary).startswith(f"type={HOSTILE['type']}")
    assert "<" not in summary and ">" not in summary and '"' not in summary


def test_rows_follow_redis_with_the_time_of_each_id(viewer_client: Client, r: redis.Redis) -> None:
    for i in range(7):
        r.xadd("orders", {"n": str(i)}, id=f"{1767225600000 + i * 1001}-{i % 2}")
    body = viewer_client.get(stream_url("orders") + "?count=5").content.decode()
    expected = [entry_id.decode() for entry_id, _ in r.xrevrange("orders", count=5)]
    rows = _rows(body)
    assert [re.search(r'<a href="[^"]*entries/([^/]+)/">', row).group(1) for row in rows] == expected
    for row, entry_id in zip(rows, expected, strict=True):
        moment = datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, tz=UTC)
        shown = re.search(r'<td class="nowrap small">([^<]*)</td>', row).group(1)
        assert shown == moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
        assert f'href="/c/{CONN}/streams/orders/entries/{entry_id}/"' in row


def test_the_htmx_refresh_answers_the_same_rows_as_the_page(viewer_client: Client, r: redis.Redis) -> None:
    for i in range(4):
        r.xadd("orders", {**HOSTILE, "n": str(i), "ts": str(1767225600000 + i)})
    page = viewer_client.get(stream_url("orders")).content.decode()
    partial = viewer_client.get(stream_url("orders"), HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<section id="entries"') and "<html" not in partial
    assert _tbody(partial) == _tbody(page) and len(_rows(page)) == 4
    times = re.findall(r'<time class="small muted field-time" datetime="([^"]+)">([^<]*)</time>', partial)
    assert times[0] == ("2026-01-01T00:00:00.003000+00:00", "2026-01-01 00:00:00.003 UTC")


@pytest.mark.parametrize(
    ("fixture", "ticks"), [("viewer_client", False), ("operator_client", False), ("admin_client_", True)]
)
def test_only_admins_get_the_delete_checkboxes(
    request: pytest.FixtureRequest, fixture: str, ticks: bool, r: redis.Redis
) -> None:
    ids = [r.xadd("orders", {"n": str(i)}).decode() for i in range(3)]
    body = request.getfixturevalue(fixture).get(stream_url("orders")).content.decode()
    boxes = re.findall(
        r'<input type="checkbox" name="ids" value="([^"]+)" form="entries-delete"', _tbody(body)
    )
    assert boxes == (ids[::-1] if ticks else [])
    assert ('data-select-all="entries-delete"' in body) is ticks


def test_pager_links_keep_the_other_parameters(viewer_client: Client, r: redis.Redis) -> None:
    for i in range(5):
        r.xadd("orders", {"n": str(i)})
    r.xgroup_create("orders", "billing", id="0")
    url = stream_url("orders") + "?count=2&groups_sort=name&q=caf%C3%A9+%26+co"
    body = viewer_client.get(url).content.decode()
    older = html.unescape(re.search(r'<a rel="next" href="([^"]+)">Older', body).group(1))
    newest_two = [entry_id.decode() for entry_id, _ in r.xrevrange("orders", count=2)]
    assert parse_qsl(urlsplit(older).query) == [
        ("count", "2"),
        ("groups_sort", "name"),
        ("q", "café & co"),
        ("before", newest_two[-1]),
    ]
    # Following it shows the next two, as Redis orders them.
    body = viewer_client.get(stream_url("orders") + older).content.decode()
    following = [
        entry_id.decode() for entry_id, _ in r.xrevrange("orders", max=f"({newest_two[-1]}", count=2)
    ]
    assert [re.search(r"entries/([^/]+)/", row).group(1) for row in _rows(body)] == following


def test_an_empty_side_says_so_and_links_back(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    body = viewer_client.get(stream_url("orders") + "?after=9999999999999-0&count=3").content.decode()
    assert "No entries on this side." in body
    back = html.unescape(re.search(r'<a href="([^"]+)">Back to the newest entries</a>', body).group(1))
    assert parse_qsl(urlsplit(back).query) == [("count", "3")]
    r.xadd("empty", {"n": "1"}, maxlen=0)  # the stream exists with no entry
    assert "This stream has no entries." in viewer_client.get(stream_url("empty")).content.decode()


def test_the_alert_strip_shows_open_alerts_only(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    rule = make_rule(Kind.OLDEST_PENDING_ABOVE, name="<i>stuck</i>")
    fields = {
        "rule": rule,
        "connection": CONN,
        "target_key": b"orders",
        "key_hash": name_hash(b"orders"),
        "target_text": "orders",
        "message": "m",
    }
    Alert.objects.create(**fields, target_hash="resolved", state=Alert.State.RESOLVED)
    assert "alert-strip" not in viewer_client.get(stream_url("orders")).content.decode()
    Alert.objects.create(**fields, target_hash="open")
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert body.count("&lt;i&gt;stuck&lt;/i&gt;") == 1 and "<i>stuck" not in body
