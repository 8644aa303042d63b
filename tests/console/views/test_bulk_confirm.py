"""Bulk actions' confirm pages, flashes and the pending table, through Django's test client, against a
real Redis.

"requeue all up to" and the sweep go through a GET confirm page that counts what they would
touch (the expected figure is computed here from XRANGE / XPENDING ... IDLE, or from what the test
wrote), changes nothing, and offers the POST button only to those who may press it; the POST then
does exactly the counted work. A requeue's flash names the new IDs (which XRANGE finds in the
target stream) and the DLQ page links them; ``next`` must be a path on this site. The pending
table shows each entry's type, or the start of its payload, or "deleted", read with one round trip
per page whatever its size (round trips counted on the redis-py connection itself).
"""

from __future__ import annotations

import html
import json
import re

import pytest
import redis
from redis.connection import AbstractConnection

from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from tests.console.helpers import dlq_url, group_url, stream_url
from tests.console.services.helpers import eventbus_dead_letter

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", response.content.decode()))


def _form(body: str, marker: str) -> str:
    """The whole ``<form ...>...</form>`` holding ``marker``."""
    at = body.index(marker)
    start = body.rindex("<form", 0, at)
    return body[start : body.index("</form>", at)]


def _dead_letters(r: redis.Redis, n: int) -> list[str]:
    return [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(n)]


# ------------------------------------------------------------------------------ requeue all (item 7)


def test_requeue_all_confirm_counts_up_to_the_id_and_changes_nothing(operator_client, r) -> None:
    ids = _dead_letters(r, 9)
    up_to = ids[5]
    expected = len(r.xrange("orders:dlq", "-", up_to))  # Redis's own answer: 6
    assert expected == 6
    response = operator_client.get(dlq_url("orders:dlq") + "requeue/confirm/", {"up_to": up_to})
    assert response.status_code == 200
    body = response.content.decode()
    assert re.search(r'id="requeue-count">\s*6\s*<', body)
    assert f"Requeue {expected} entries" in body
    assert f'name="up_to" value="{up_to}"' in body and 'name="all" value="1"' in body
    # a read: nothing moved, no job, no audit row
    assert r.xlen("orders:dlq") == 9 and not r.exists("orders")
    assert not Job.objects.exists() and not AuditEvent.objects.exists()

    response = operator_client.post(dlq_url("orders:dlq") + "requeue/", {"all": "1", "up_to": up_to})
    job = Job.objects.get()
    jobs.job_run(job.pk)
    assert r.xlen("orders") == expected
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == ids[6:]
    assert list(AuditEvent.objects.order_by("pk").values_list("action", flat=True)) == [
        "dlq.requeue_all",
        "dlq.requeue_all.finished",
    ]


def test_requeue_all_confirm_offers_no_button_to_a_viewer_and_refuses_bad_input(viewer_client, r) -> None:
    ids = _dead_letters(r, 2)
    body = viewer_client.get(dlq_url("orders:dlq") + "requeue/confirm/", {"up_to": ids[-1]}).content.decode()
    assert re.search(r'id="requeue-count">\s*2\s*<', body)
    assert 'requeue/"' not in body and "needs the operator role" in body
    assert viewer_client.get(dlq_url("orders:dlq") + "requeue/confirm/").status_code == 400
    assert viewer_client.get(dlq_url("orders:dlq") + "requeue/confirm/", {"up_to": "soon"}).status_code == 400
    assert viewer_client.get(dlq_url("nothing:dlq") + "requeue/confirm/", {"up_to": "1-0"}).status_code == 404
    assert (
        viewer_client.post(dlq_url("orders:dlq") + "requeue/confirm/", {"up_to": ids[-1]}).status_code == 405
    )


def test_dlq_page_requeue_all_button_is_a_get_form_to_the_confirm_page(operator_client, r) -> None:
    ids = _dead_letters(r, 3)
    body = operator_client.get(dlq_url("orders:dlq")).content.decode()
    form = _form(body, 'id="requeue-all-form"')
    assert 'method="get"' in form and f'{dlq_url("orders:dlq")}requeue/confirm/"' in form
    assert f'name="up_to" value="{ids[-1]}"' in form and "csrfmiddlewaretoken" not in form


# ------------------------------------------------------------------------------------ sweep (item 7)


def _stuck_bus(r: redis.Redis, *, idle: int, fresh: int) -> tuple[list[str], list[str]]:
    """``idle`` pending entries idle for an hour (set with XCLAIM IDLE, not waited for), then ``fresh`` ones."""
    ids = [
        r.xadd("orders", {"type": "order.created", "data": json.dumps({"n": i})}).decode()
        for i in range(idle + fresh)
    ]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"})
    if idle:
        r.xclaim("orders", "billing", "worker-1", 0, ids[:idle], idle=3_600_000, justid=True)
    return ids[:idle], ids[idle:]


def test_sweep_confirm_counts_idle_entries_bounded_by_count_then_claims_exactly_those(
    operator_client, r
) -> None:
    stuck, _fresh = _stuck_bus(r, idle=7, fresh=3)
    min_idle, count = 600_000, 5
    idle_now = [
        p["message_id"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 100, idle=min_idle)
    ]
    expected = idle_now[:count]
    assert len(idle_now) == 7 and len(expected) == 5
    query = {
        "consumer": "sweeper",
        "min_idle_ms": min_idle,
        "count": count,
        "next": group_url("orders", "billing") + "?count=3",
    }
    response = operator_client.get(group_url("orders", "billing") + "autoclaim/confirm/", query)
    assert response.status_code == 200
    body = response.content.decode()
    assert re.search(r'id="sweep-count">\s*5\s*<', body)
    assert "More idle entries stay pending" in body
    owners = {
        p["message_id"].decode(): p["consumer"].decode()
        for p in r.xpending_range("orders", "billing", "-", "+", 100)
    }
    assert set(owners.values()) == {"worker-1"} and not AuditEvent.objects.exists()
    [back] = re.findall(r'name="next" value="([^"]+)"', body)
    assert html.unescape(back) == query["next"]

    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', body))
    response = operator_client.post(
        group_url("orders", "billing") + "autoclaim/", {**form, "next": html.unescape(back)}
    )
    assert response.status_code == 302 and response["Location"] == query["next"]
    owners = {
        p["message_id"].decode(): p["consumer"].decode()
        for p in r.xpending_range("orders", "billing", "-", "+", 100)
    }
    assert sorted(e for e, c in owners.items() if c == "sweeper") == sorted(expected)
    assert AuditEvent.objects.get(action="autoclaim").affected == len(expected)


def test_sweep_confirm_says_when_nothing_is_idle_enough(operator_client, r) -> None:
    _stuck_bus(r, idle=0, fresh=2)
    query = {"consumer": "sweeper", "min_idle_ms": 600_000, "count": 10}
    body = operator_client.get(group_url("orders", "billing") + "autoclaim/confirm/", query).content.decode()
    assert re.search(r'id="sweep-count">\s*0\s*<', body) and "nothing is idle that long" in body
    assert 'autoclaim/"' not in body


def test_sweep_confirm_reports_deleted_entries_and_still_counts_the_limit_of_existing_ones(
    operator_client, r
) -> None:
    stuck, _ = _stuck_bus(r, idle=6, fresh=0)
    r.xdel("orders", stuck[0], stuck[2])
    query = {"consumer": "sweeper", "min_idle_ms": 600_000, "count": 3}
    response = operator_client.get(group_url("orders", "billing") + "autoclaim/confirm/", query)
    # XAUTOCLAIM drops deleted entries without counting them: it claims the first 3 that exist
    assert re.search(r'id="sweep-count">\s*3\s*<', response.content.decode())
    assert "2 idle pending entries were deleted from the stream" in " ".join(_text(response).split())
    operator_client.post(group_url("orders", "billing") + "autoclaim/", {**query, "consumer": "sweeper"})
    owners = {
        p["message_id"].decode(): p["consumer"].decode()
        for p in r.xpending_range("orders", "billing", "-", "+", 100)
    }
    assert sorted(e for e, c in owners.items() if c == "sweeper") == sorted([stuck[1], stuck[3], stuck[4]])


def test_group_page_sweep_is_a_get_form_to_its_confirm_page(operator_client, r) -> None:
    _stuck_bus(r, idle=1, fresh=0)
    body = operator_client.get(group_url("orders", "billing") + "?consumer=worker-1").content.decode()
    form = _form(body, 'id="sweep-form"')
    assert 'method="get"' in form and 'autoclaim/confirm/"' in form and "csrfmiddlewaretoken" not in form
    [back] = re.findall(r'name="next" value="([^"]+)"', form)
    assert html.unescape(back) == group_url("orders", "billing") + "?consumer=worker-1"


# ---------------------------------------------------------------------------- requeue flash (item 9)


def test_requeue_flash_names_the_new_ids_and_the_dlq_page_links_them(operator_client, r) -> None:
    ids = _dead_letters(r, 3)
    page = dlq_url("orders:dlq") + "?error=card"
    response = operator_client.post(
        dlq_url("orders:dlq") + "requeue/", {"ids": [*ids, "1-999"], "next": page}, follow=True
    )
    assert response.redirect_chain == [(page, 302)]
    new_ids = [e[0].decode() for e in r.xrange("orders")]
    assert len(new_ids) == 3
    text = _text(response)
    assert f"Requeued 3 entries to orders: {', '.join(new_ids)}." in text
    assert "1 entry was already gone" in text and "1-999" in text
    body = response.content.decode()
    for new_id in new_ids:
        assert f'href="{stream_url("orders")}entries/{new_id}/"' in body
    # the links belong to that one redirect
    assert 'id="requeued-links"' not in operator_client.get(page).content.decode()


def test_requeue_flash_is_bounded_for_a_big_selection(operator_client, r) -> None:
    ids = _dead_letters(r, 14)
    response = operator_client.post(dlq_url("orders:dlq") + "requeue/", {"ids": ids}, follow=True)
    new_ids = [e[0].decode() for e in r.xrange("orders")]
    text = _text(response)
    assert f"Requeued 14 entries to orders: {', '.join(new_ids[:10])} and 4 more." in text
    assert re.search(r"New entries:.*and 4 more", " ".join(text.split()))


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"]
)
def test_next_must_be_a_path_on_this_site(operator_client, r, target) -> None:
    ids = _dead_letters(r, 1)
    response = operator_client.post(dlq_url("orders:dlq") + "requeue/", {"ids": ids, "next": target})
    assert response.status_code == 302 and response["Location"] == dlq_url("orders:dlq")


def test_purge_comes_back_to_the_filtered_dlq_page(admin_client_, r) -> None:
    ids = _dead_letters(r, 2)
    page = dlq_url("orders:dlq") + "?error=card+1"
    body = admin_client_.get(page).content.decode()
    purge = body[body.index('purge/"') :]
    [back] = re.findall(r'name="next" value="([^"]+)"', purge[: purge.index("</form>")])
    response = admin_client_.post(
        dlq_url("orders:dlq") + "purge/",
        {"up_to": ids[-1], "confirm": "orders:dlq", "next": html.unescape(back)},
    )
    assert response["Location"] == page and r.xlen("orders:dlq") == 0


# --------------------------------------------------------------------------- pending preview (item 12)


def test_pending_rows_show_the_type_a_payload_preview_or_deleted(viewer_client, r) -> None:
    typed = r.xadd("orders", {"type": "order.created", "data": "{}"}).decode()
    untyped = r.xadd("orders", {"data": json.dumps({"order_id": 7, "note": "<b>x</b>"})}).decode()
    gone = r.xadd("orders", {"type": "order.cancelled"}).decode()
    long_one = r.xadd("orders", {"blob": "y" * 5000}).decode()
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w", {"orders": ">"})
    r.xdel("orders", gone)
    body = viewer_client.get(group_url("orders", "billing")).content.decode()
    cells = dict(re.findall(r'data-id="([^"]+)".*?<td class="pending-preview">(.*?)</td>', body, re.S))
    assert set(cells) == {typed, untyped, gone, long_one}
    assert ">order.created</code>" in cells[typed]
    assert (
        "order_id" in cells[untyped]
        and "&lt;b&gt;x&lt;/b&gt;" in cells[untyped]
        and "<b>" not in cells[untyped]
    )
    assert ">deleted</span>" in cells[gone] and "order.cancelled" not in cells[gone]
    preview = html.unescape(re.sub(r"<[^>]+>", "", cells[long_one])).strip()
    assert preview.startswith("blob=yyy") and preview.endswith("…") and len(preview) <= 80


def _round_trips(monkeypatch, client, url: str) -> int:
    """How many times redis-py sent something to a server while ``url`` was answered (a pipeline: once)."""
    sent = []
    original = AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        sent.append(1)
        return original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    try:
        assert client.get(url).status_code == 200
    finally:
        monkeypatch.setattr(AbstractConnection, "send_packed_command", original)
    return len(sent)


def test_pending_previews_cost_one_round_trip_per_page_whatever_its_size(
    monkeypatch, viewer_client, r
) -> None:
    ids = [r.xadd("orders", {"type": f"t{i}"}).decode() for i in range(60)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w", {"orders": ">"})
    url = group_url("orders", "billing")
    viewer_client.get(url)  # warm: connections, cached health
    small = _round_trips(monkeypatch, viewer_client, url + "?count=2")
    big = _round_trips(monkeypatch, viewer_client, url + "?count=60")
    assert small == big
    body = viewer_client.get(url + "?count=60").content.decode()
    assert body.count('<td class="pending-preview"><code') == 60 and ">t59</code>" in body and len(ids) == 60
