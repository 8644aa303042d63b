"""What the group page tells an operator to type or to look at.

* The handler metrics of a stream are in its own ``{S}:metrics`` (README: "Metric events ... go to the
  stream's own {S}:metrics"); the page and its panel named only the old shared ``eventbus:metrics``. The
  expected key is spelled here by the README's rule (a stream without a hash tag is wrapped in braces, one
  with a tag keeps its name), not by the code that names it.
* The "ack matching" box's example used ``error``, a variable only dead letters have: on a stream it
  matches nothing. The example is read off the page, checked to name no dead-letter-only variable, and
  run through the box's own confirm page on bus events, where it must match some.
"""

from __future__ import annotations

import html
import json
import re
import uuid

import pytest
import redis
from django.test import Client

from tests.console.helpers import group_url

# The dead-letter fields a query may name on a DLQ only (README, "Search": error, traceback, retries...).
DLQ_ONLY = ("error", "traceback", "retries", "origin", "original_id", "failed_at")


@pytest.mark.parametrize(("stream", "own_metrics"), [("orders", "{orders}:metrics"), ("{orders}.v2", "{orders}.v2:metrics")])
def test_the_group_page_and_its_panel_name_the_streams_own_metrics_key(
    stream, own_metrics, r: redis.Redis, viewer_client: Client
) -> None:
    r.xadd(stream, {"type": "order.created", "data": "{}"})
    r.xgroup_create(stream, "billing", id="0")

    page = viewer_client.get(group_url(stream, "billing")).content.decode()
    placeholder = page[page.index('class="handler-panel"'):]
    placeholder = html.unescape(placeholder[: placeholder.index("</section>")])
    assert own_metrics in placeholder

    panel = html.unescape(viewer_client.get(group_url(stream, "billing") + "handlers/", HTTP_HX_REQUEST="true").content.decode())
    assert "No handler metrics" in panel  # no metric entries yet: the panel says where they would be
    assert own_metrics in panel
    # The old shared stream may be mentioned, as what older workers wrote, never as the only place.
    for text in (placeholder, panel):
        for mention in re.finditer(r"eventbus:metrics", text):
            assert own_metrics in text[max(0, mention.start() - 200): mention.end() + 200]


def test_the_ack_matching_example_works_on_a_stream(r: redis.Redis, operator_client: Client) -> None:
    # Events as the bus publishes them (type, JSON data, an event id), all pending in one group.
    for n in range(20):
        r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": n, "total": 10 * n}), "id": uuid.uuid4().hex})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"})

    page = operator_client.get(group_url("orders", "billing")).content.decode()
    form = page[page.index('id="ack-matching-form"'):]
    [(_, placeholder)] = re.findall(r'name="q"[^>]*placeholder=(["\'])(.*?)\1', form[: form.index("</form>")])
    example = html.unescape(placeholder).removesuffix(" or plain text")
    names = set(re.findall(r"(?<![\w.\"'])([A-Za-z_]\w*)(?=\s*(?:\.|==|!=|<|>|\)|$))", example))
    assert not names & set(DLQ_ONLY), f"the example {example!r} names a dead-letter-only variable"

    confirm = operator_client.get(group_url("orders", "billing") + "search/ack/confirm/", {"q": example})
    assert confirm.status_code == 200, confirm.content.decode()[:500]
    [count] = re.findall(r'<strong id="ack-count">(\d+)</strong>', confirm.content.decode())
    assert 0 < int(count) < 20, f"the example {example!r} matches {count} of 20 pending events"
    assert r.xpending("orders", "billing")["pending"] == 20  # counting changed nothing


def test_the_pending_card_says_it_is_read_live(viewer_client, r) -> None:
    """The card and the chart beside it count different things at different times: the
    card says it is Redis's figure now, which is XPENDING's."""
    for n in range(7):
        r.xadd("cards", {"n": str(n)})
    r.xgroup_create("cards", "g", id="0")
    r.xreadgroup("g", "c", {"cards": ">"}, count=5)
    page = viewer_client.get("/c/default/streams/cards/groups/g/").content.decode()
    expected = r.xpending("cards", "g")["pending"]
    assert f'Pending, live now</span><span class="value">{expected}</span>' in page
