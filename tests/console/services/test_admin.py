"""Admin actions: delete a consumer or a group, trim a stream, delete entries, and where pages offer them.

What each action did is read back from Redis itself (XINFO CONSUMERS / GROUPS, XLEN, XRANGE, XPENDING)
or computed in plain Python over the IDs the test wrote, never from the code under test: a trim removes
exactly what its preview counted, an approximate MAXLEN keeps at least N, XDEL leaves the PEL alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import httpx
import pytest
import redis

from streams_app.accounts.tokens import token_create
from streams_app.audit.models import AuditEvent
from tests.console.helpers import api, consumer_url, group_url, post_json, seg, stream_url
from tests.console.services.helpers import consumers

# ------------------------------------------------------------------------------ delete a consumer


def test_delete_consumer_with_pending_is_refused_without_force(admin_user, api_token, bus) -> None:
    url = api(consumer_url("orders", "billing", "worker-1") + "delete")
    pending_before = consumers(bus.r)["worker-1"]
    assert pending_before == 4
    refused = post_json(url, {}, api_token(admin_user))
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "conflict"
    assert "4 pending entries" in refused.json()["error"]["message"]
    assert consumers(bus.r) == {"worker-1": 4, "idle-1": 0}  # still there, entries still pending

    done = post_json(url, {"force": True}, api_token(admin_user))
    assert done.status_code == 200
    assert done.json() == {"consumer": "worker-1", "deleted": True, "pending_dropped": pending_before}
    assert consumers(bus.r) == {"idle-1": 0}
    assert bus.r.xpending("orders", "billing")["pending"] == 0  # dropped from the PEL, as Redis does

    rows = list(AuditEvent.objects.order_by("pk"))
    assert [(e.action, e.outcome, e.affected) for e in rows] == [
        ("consumer.delete", "error", 0), ("consumer.delete", "ok", pending_before)
    ]
    assert "pending" in rows[0].error
    assert rows[1].target_group == "billing"
    assert bytes(rows[1].target_stream) == b"orders"
    assert rows[1].parameters == {"consumer": "worker-1", "force": True, "pending_dropped": 4}


def test_delete_consumer_without_pending_needs_no_force(admin_user, api_token, bus) -> None:
    reply = post_json(api(consumer_url("orders", "billing", "idle-1") + "delete"), {}, api_token(admin_user))
    assert reply.json() == {"consumer": "idle-1", "deleted": True, "pending_dropped": 0}
    assert consumers(bus.r) == {"worker-1": 4}


def test_delete_unknown_consumer_or_group_is_a_404(admin_user, api_token, bus) -> None:
    token = api_token(admin_user)
    assert post_json(api(consumer_url("orders", "billing", "ghost") + "delete"), {}, token).status_code == 404
    assert post_json(api(consumer_url("orders", "nope", "worker-1") + "delete"), {}, token).status_code == 404
    assert post_json(api(consumer_url("missing", "billing", "w") + "delete"), {}, token).status_code == 404
    assert list(AuditEvent.objects.values_list("outcome", flat=True)) == ["error"] * 3


def test_consumer_delete_page_shows_pending_and_links_the_claim_form(admin_client_, bus) -> None:
    page = admin_client_.post(consumer_url("orders", "billing", "worker-1") + "delete/preview/")
    body = page.content.decode()
    assert page.status_code == 200
    assert '<strong id="consumer-pending">4</strong>' in body
    assert f'href="{group_url("orders", "billing")}?consumer=worker-1#pending"' in body
    assert 'name="force"' in body
    assert consumers(bus.r)["worker-1"] == 4  # the preview changed nothing

    # The confirm form without the box ticked: refused, the consumer stays, the page says why.
    refused = admin_client_.post(consumer_url("orders", "billing", "worker-1") + "delete/", follow=True)
    assert refused.redirect_chain[-1][0] == group_url("orders", "billing")
    assert "still has 4 pending entries" in refused.content.decode()
    assert "worker-1" in consumers(bus.r)

    done = admin_client_.post(consumer_url("orders", "billing", "worker-1") + "delete/", {"force": "1"}, follow=True)
    assert "4 pending entries were dropped" in done.content.decode()
    assert "worker-1" not in consumers(bus.r)


def test_consumer_delete_page_without_pending_offers_plain_delete(admin_client_, bus) -> None:
    body = admin_client_.post(consumer_url("orders", "billing", "idle-1") + "delete/preview/").content.decode()
    assert '<strong id="consumer-pending">0</strong>' in body
    assert 'name="force"' not in body
    admin_client_.post(consumer_url("orders", "billing", "idle-1") + "delete/")
    assert consumers(bus.r) == {"worker-1": 4}


def test_binary_consumer_names_round_trip(admin_user, api_token, r: redis.Redis) -> None:
    r.xadd("orders", {"a": "1"})
    r.xgroup_create("orders", "billing", id="0")
    name = b"w\xff 1:\x00"  # not UTF-8; "/" and "%" need a real server (see the raw-path middleware)
    r.execute_command("XGROUP", "CREATECONSUMER", "orders", "billing", name)
    url = api(f"{group_url('orders', 'billing')}consumers/{seg(name)}/delete")
    assert post_json(url, {}, api_token(admin_user)).status_code == 200
    assert r.xinfo_consumers("orders", "billing") == []


def test_consumer_names_with_slash_and_percent_through_a_real_server(asgi_server, admin_user, r: redis.Redis) -> None:
    """A real ASGI server hands Django the raw path, so %2F and %25 in a consumer name survive."""
    r.xadd("a/b", {"a": "1"})
    r.xgroup_create("a/b", "g%1", id="0")
    names = [b"w/1", b"100%", b"\xff/%2F"]
    for name in names:
        r.execute_command("XGROUP", "CREATECONSUMER", "a/b", "g%1", name)
    raw = token_create(user=admin_user, name="real server")[1]
    with httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Bearer {raw}"}) as http:
        for name in names[:2]:
            reply = http.post(api(f"{group_url('a/b', 'g%1')}consumers/{seg(name)}/delete"), json={})
            assert reply.status_code == 200, (name, reply.text)
    assert [c["name"] for c in r.xinfo_consumers("a/b", "g%1")] == [names[2]]


# --------------------------------------------------------------------------------- delete a group


def test_group_delete_needs_the_typed_name(admin_user, api_token, bus) -> None:
    bus.r.xgroup_create("orders", "audit", id="$")
    url = api(group_url("orders", "billing") + "delete")
    wrong = post_json(url, {"confirm": "Billing"}, api_token(admin_user))
    assert wrong.status_code == 400
    assert "type its name" in wrong.json()["error"]["message"]
    missing = post_json(url, {}, api_token(admin_user))
    assert missing.status_code == 400
    assert {g["name"] for g in bus.r.xinfo_groups("orders")} == {b"billing", b"audit"}

    done = post_json(url, {"confirm": "billing"}, api_token(admin_user))
    assert done.json() == {
        "group": "billing", "deleted": True, "consumers": 2, "pending_dropped": 4, "last_delivered_id": bus.ids[3]
    }
    assert [g["name"] for g in bus.r.xinfo_groups("orders")] == [b"audit"]
    assert bus.r.xlen("orders") == 10  # the stream keeps its entries
    event = AuditEvent.objects.order_by("pk").last()
    assert (event.action, event.outcome, event.affected, event.target_group) == ("group.delete", "ok", 4, "billing")
    assert event.parameters == {"consumers": 2, "pending_dropped": 4, "last_delivered_id": bus.ids[3]}
    assert list(AuditEvent.objects.order_by("pk").values_list("outcome", flat=True)) == ["error", "error", "ok"]
    assert post_json(url, {"confirm": "billing"}, api_token(admin_user)).status_code == 404


def test_group_delete_from_the_page_lands_on_the_stream(admin_client_, bus) -> None:
    wrong = admin_client_.post(group_url("orders", "billing") + "delete/", {"confirm": "x"}, follow=True)
    assert wrong.redirect_chain[-1][0] == group_url("orders", "billing")
    assert "type its name exactly" in wrong.content.decode()
    done = admin_client_.post(group_url("orders", "billing") + "delete/", {"confirm": "billing"}, follow=True)
    assert done.redirect_chain[-1][0] == stream_url("orders")
    assert "Deleted group billing with its 2 consumers and 4 pending entries" in done.content.decode()
    assert bus.r.xinfo_groups("orders") == []


# ------------------------------------------------------------------------------------------- trim


@pytest.fixture
def big(r: redis.Redis) -> SimpleNamespace:
    """``big``: 25,000 entries, more than one XTRIM ~ call removes (its implicit LIMIT is 10,000)."""
    ids: list[str] = []
    for chunk in range(25):
        pipe = r.pipeline(transaction=False)
        for i in range(1000):
            pipe.xadd("big", {"n": str(chunk * 1000 + i)})
        ids += [entry_id.decode() for entry_id in pipe.execute()]
    node = int(r.config_get("stream-node-max-entries")["stream-node-max-entries"])
    return SimpleNamespace(r=r, ids=ids, node=node)


def test_trim_minid_removes_exactly_what_the_preview_counted(admin_user, api_token, big) -> None:
    token = api_token(admin_user)
    cut = big.ids[17_345]  # in the middle of a node
    expected = sum(1 for i in big.ids if tuple(map(int, i.split("-"))) < tuple(map(int, cut.split("-"))))
    url = api(stream_url("big") + "trim")
    preview = post_json(url, {"minid": cut, "dry_run": True}, token).json()
    assert preview["will_remove"] == expected == 17_345
    assert preview["approximate"] is False
    assert big.r.xlen("big") == 25_000  # a dry run changes nothing

    done = post_json(url, {"minid": cut}, token).json()
    assert done["removed"] == preview["will_remove"]
    assert big.r.xlen("big") == 25_000 - expected == done["length"]
    assert big.r.xrange("big", count=1)[0][0].decode() == cut
    event = AuditEvent.objects.order_by("pk").last()
    assert (event.action, event.outcome, event.affected) == ("stream.trim", "ok", expected)
    assert event.parameters == {"minid": cut, "strategy": "minid", "length_after": 25_000 - expected}


def test_trim_minid_by_time(admin_client_, r: redis.Redis) -> None:
    for ms in (1_000, 2_000, 2_000, 3_000, 4_000):
        r.xadd("timed", {"n": "x"}, id=f"{ms}-*")
    when = datetime.fromtimestamp(3, tz=UTC).isoformat()  # 3,000 ms: the entries of 1 s and 2 s go
    page = admin_client_.post(stream_url("timed") + "trim/preview/", {"minid": when})
    body = page.content.decode()
    assert '<strong id="will-remove">3</strong>' in body
    assert '<strong class="mono" id="trim-minid">3000-0</strong>' in body
    assert 'name="minid" value="3000-0"' in body
    admin_client_.post(stream_url("timed") + "trim/", {"minid": "3000-0"})
    assert [e[0] for e in r.xrange("timed")] == [b"3000-0", b"4000-0"]


def test_trim_maxlen_is_approximate_but_keeps_at_least_n(admin_user, api_token, admin_client_, big) -> None:
    page = admin_client_.post(stream_url("big") + "trim/preview/", {"maxlen": "1000"}).content.decode()
    assert '<strong id="will-remove">about 24000</strong>' in page
    preview = post_json(api(stream_url("big") + "trim"), {"maxlen": 1000, "dry_run": True}, api_token(admin_user)).json()
    assert (preview["will_remove"], preview["approximate"], preview["length"]) == (24_000, True, 25_000)

    done = post_json(api(stream_url("big") + "trim"), {"maxlen": 1000}, api_token(admin_user)).json()
    length = big.r.xlen("big")
    assert done["length"] == length
    assert 1000 <= length < 1000 + big.node  # kept at least N; only a partial node more
    assert done["removed"] == 25_000 - length <= preview["will_remove"]
    # The newest entries are the ones kept.
    assert [e[0].decode() for e in big.r.xrevrange("big", count=1000)] == big.ids[::-1][:1000]


def test_trim_preview_warns_about_pending_entries_in_the_trimmed_range(admin_user, api_token, admin_client_, big) -> None:
    r = big.r
    r.xgroup_create("big", "slow", id="0")
    r.xreadgroup("slow", "w", {"big": ">"}, count=30)  # 30 oldest entries pending
    r.xgroup_create("big", "fast", id=big.ids[24_000])
    r.xreadgroup("fast", "w", {"big": ">"}, count=5)  # pending, but among the newest
    r.xgroup_create("big", "idle", id="$")
    cut = big.ids[20]
    pending_below = len(r.xpending_range("big", "slow", "-", f"({cut}", 1000))
    assert pending_below == 20
    preview = post_json(api(stream_url("big") + "trim"), {"minid": cut, "dry_run": True}, api_token(admin_user)).json()
    assert preview["pending"] == [{"group": "slow", "count": 20, "more": False, "oldest_id": big.ids[0]}]
    page = admin_client_.post(stream_url("big") + "trim/preview/", {"maxlen": "100"}).content.decode()
    assert 'id="trim-pending-warning"' in page
    assert ">slow</a>: 30 pending" in page and ">fast</a>: 5 pending" in page
    keep_most = admin_client_.post(stream_url("big") + "trim/preview/", {"maxlen": "24990"}).content.decode()
    assert ">slow</a>: 10 pending" in keep_most  # the 10 oldest go: 10 of its 30 pending entries
    assert "fast</a>" not in keep_most
    assert r.xlen("big") == 25_000


def test_trim_needs_exactly_one_threshold(admin_user, api_token, bus) -> None:
    url = api(stream_url("orders") + "trim")
    for body in ({}, {"maxlen": 5, "minid": bus.ids[2]}, {"maxlen": -1}, {"minid": "yesterday"}):
        reply = post_json(url, body, api_token(admin_user))
        assert reply.status_code == 400, body
    assert post_json(api(stream_url("nothing") + "trim"), {"maxlen": 1}, api_token(admin_user)).status_code == 404
    assert bus.r.xlen("orders") == 10


# --------------------------------------------------------------------------------- delete entries


def test_delete_entries_reports_missing_and_still_pending(admin_user, api_token, bus) -> None:
    token = api_token(admin_user)
    url = api(stream_url("orders") + "delete")
    wanted = [bus.ids[2], bus.ids[7], "1-1"]
    preview = post_json(url, {"ids": wanted, "dry_run": True}, token).json()
    assert preview == {"existing": wanted[:2], "missing": ["1-1"], "pending": {"billing": [bus.ids[2]]}, "dry_run": True}
    assert bus.r.xlen("orders") == 10

    done = post_json(url, {"ids": wanted}, token).json()
    assert done == {
        "deleted": 2, "deleted_ids": wanted[:2], "missing": ["1-1"], "still_pending": {"billing": [bus.ids[2]]},
        "dry_run": False,
    }
    left = [e[0].decode() for e in bus.r.xrange("orders")]
    assert left == [i for i in bus.ids if i not in wanted]
    # XDEL does not touch the PEL: the deleted entry is still pending, as the reply said.
    assert bus.ids[2] in {p["message_id"].decode() for p in bus.r.xpending_range("orders", "billing", "-", "+", 10)}
    event = AuditEvent.objects.order_by("pk").last()
    assert (event.action, event.outcome, event.affected, event.target_ids) == ("stream.delete", "ok", 2, wanted)
    assert event.parameters == {"missing": ["1-1"], "still_pending": {"billing": [bus.ids[2]]}}


def test_delete_entries_from_the_stream_page(admin_client_, bus) -> None:
    page = admin_client_.post(
        stream_url("orders") + "delete/preview/", {"ids": [bus.ids[9]], "ids_text": f"{bus.ids[8]}\n{bus.ids[5]}, 5-5"}
    )
    body = page.content.decode()
    assert '<strong id="delete-count">3</strong>' in body
    for entry_id in (bus.ids[9], bus.ids[8], bus.ids[5]):
        assert f'name="ids" value="{entry_id}"' in body
    assert "5-5" in body
    assert bus.r.xlen("orders") == 10
    done = admin_client_.post(stream_url("orders") + "delete/", {"ids": [bus.ids[9], bus.ids[8], bus.ids[5]]}, follow=True)
    assert "Deleted 3 entries." in done.content.decode()
    assert bus.r.xlen("orders") == 7
    bad = admin_client_.post(stream_url("orders") + "delete/preview/", {"ids_text": "not-an-id"}, follow=True)
    assert "is not a stream ID" in bad.content.decode()


# ---------------------------------------------------------------------------------- page controls


def test_admin_controls_show_only_to_admins(admin_client_, operator_client, viewer_client, settings, bus) -> None:
    group_page, stream_page = group_url("orders", "billing"), stream_url("orders")
    admin_group = admin_client_.get(group_page).content.decode()
    assert f'action="{consumer_url("orders", "billing", "worker-1")}delete/preview/"' in admin_group
    assert f'action="{group_page}delete/"' in admin_group
    admin_stream = admin_client_.get(stream_page).content.decode()
    assert f'action="{stream_page}trim/preview/"' in admin_stream
    assert f'action="{stream_page}delete/preview/"' in admin_stream
    assert admin_stream.count('type="checkbox" name="ids"') == 10  # a checkbox per entry on the page
    assert admin_stream.count('form="entries-delete"') == 11  # and the selection bar's button
    for web in (operator_client, viewer_client):
        assert "delete/preview/" not in web.get(group_page).content.decode()
        body = web.get(stream_page).content.decode()
        assert "trim/preview/" not in body and 'form="entries-delete"' not in body
    settings.BUSCONSOLE_READ_ONLY = True
    assert "trim/preview/" not in admin_client_.get(stream_page).content.decode()
    assert "delete/preview/" not in admin_client_.get(group_page).content.decode()
