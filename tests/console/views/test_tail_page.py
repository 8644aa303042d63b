"""The live tail page reads its state from its address: ``filter``, ``paused``,
``after`` (the newest ID it had shown) and ``keep``, validated by a form (a malformed value is a 400
naming it), and tells its script where to replay from and where to hold.

Expected positions are read from Redis itself (XREVRANGE), not from the view.
"""

from __future__ import annotations

import html
import re

import pytest
import redis
from django.test import Client

from streams_app.views.tail import BACKLOG
from tests.console.helpers import stream_url

TAIL = stream_url("orders") + "tail/"


def data_attr(body: str, name: str) -> str | None:
    found = re.search(rf'<section id="tail"[^>]*\sdata-{name}="([^"]*)"', body)
    return html.unescape(found.group(1)) if found else None


@pytest.fixture
def ids(r: redis.Redis) -> list[str]:
    return [r.xadd("orders", {"n": str(i)}).decode() for i in range(BACKLOG + 30)]


def test_without_state_it_replays_the_newest_backlog_and_does_not_hold(viewer_client: Client, r, ids) -> None:
    body = viewer_client.get(TAIL).content.decode()
    newest = [e[0].decode() for e in r.xrevrange("orders", count=BACKLOG + 1)]
    assert data_attr(body, "after") == newest[BACKLOG]
    assert data_attr(body, "hold") == "" and data_attr(body, "paused") is None


def test_after_replays_the_backlog_up_to_it_and_paused_holds_there(viewer_client: Client, r, ids) -> None:
    position = ids[60]
    response = viewer_client.get(
        TAIL, {"after": position, "paused": "1", "filter": 'customer.name=<b>"ada"', "keep": "2000"}
    )
    body = response.content.decode()
    assert response.status_code == 200
    up_to = [e[0].decode() for e in r.xrevrange("orders", max=position, count=BACKLOG + 1)]
    assert up_to[0] == position and data_attr(body, "after") == up_to[BACKLOG]
    assert data_attr(body, "hold") == position and data_attr(body, "paused") == "1"
    assert 'value="customer.name=&lt;b&gt;&quot;ada&quot;"' in body  # the filter comes back, escaped
    assert "<option selected>2000</option>" in body
    assert ">Resume</button>" in body


def test_after_without_paused_replays_from_the_context_and_does_not_hold(
    viewer_client: Client, r, ids
) -> None:
    body = viewer_client.get(TAIL, {"after": ids[10]}).content.decode()
    assert data_attr(body, "after") == "0-0"  # fewer than BACKLOG entries up to it: all of them
    assert data_attr(body, "hold") == ""


def test_a_paused_link_without_a_position_holds_at_the_newest_entry(viewer_client: Client, r, ids) -> None:
    body = viewer_client.get(TAIL, {"paused": "1"}).content.decode()
    assert data_attr(body, "hold") == r.xrevrange("orders", count=1)[0][0].decode()


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"after": "banana"}, "after"),
        ({"after": "1-2-3"}, "after"),
        ({"keep": "7"}, "keep"),
        ({"filter": "x" * 2001}, "filter"),  # longer than a search query may be (search.MAX_QUERY)
    ],
)
def test_a_malformed_address_is_a_400_naming_the_parameter(viewer_client: Client, ids, query, named) -> None:
    response = viewer_client.get(TAIL, query)
    assert response.status_code == 400
    assert f"{named}:" in response.content.decode()


def test_a_position_on_a_missing_stream_is_fine(viewer_client: Client, r) -> None:
    response = viewer_client.get(stream_url("nothing") + "tail/", {"after": "5-0", "paused": "1"})
    assert response.status_code == 200
    assert data_attr(response.content.decode(), "hold") == "5-0"
