"""Claim, autoclaim, ack and rewind on a consumer group, through the group page and the JSON API.

What each action did is read back from Redis: owners from XPENDING, the group's last-delivered ID and lag
from XINFO GROUPS, and what a rewind redelivers from a fresh XREADGROUP, compared with the preview's count
and with the IDs the test wrote. Idle times are set with ``XCLAIM ... IDLE`` rather than waited for.
"""

from __future__ import annotations

import redis

from tests.console.helpers import api, group_url, post_json


def _owners(r: redis.Redis) -> dict[str, str]:
    return {p["message_id"].decode(): p["consumer"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 100)}


# ------------------------------------------------------------------------------------------ claim


def test_api_claim_skips_an_entry_that_became_active_and_reports_deleted(operator, api_token, bus) -> None:
    r = bus.r
    r.xclaim("orders", "billing", "worker-1", 0, [bus.ids[1]], justid=True)  # a heartbeat: idle is 0 again
    r.xdel("orders", bus.ids[2])
    reply = post_json(
        api(group_url("orders", "billing") + "claim"),
        {"ids": bus.ids[:4], "consumer": "worker-2", "min_idle_ms": 50_000},
        api_token(operator),
    )
    assert reply.status_code == 200
    assert reply.json() == {"claimed": [bus.ids[0], bus.ids[3]], "skipped": [bus.ids[1]], "deleted": [bus.ids[2]]}
    owners = _owners(r)
    assert owners == {bus.ids[0]: "worker-2", bus.ids[1]: "worker-1", bus.ids[3]: "worker-2"}


def test_html_claim_from_the_group_page_says_what_happened(operator_client, bus) -> None:
    bus.r.xclaim("orders", "billing", "worker-1", 0, [bus.ids[1]], justid=True)
    response = operator_client.post(
        group_url("orders", "billing") + "claim/",
        {"ids": bus.ids[:2], "consumer": "worker-2", "min_idle_ms": 50_000}, follow=True,
    )
    body = response.content.decode()
    assert response.redirect_chain[-1][0] == group_url("orders", "billing")
    assert "Claimed 1 entry to worker-2." in body
    assert f"Skipped 1 entry ({bus.ids[1]})" in body
    assert _owners(bus.r)[bus.ids[0]] == "worker-2"


def test_api_autoclaim_sweeps_idle_entries(operator, api_token, bus) -> None:
    bus.r.xclaim("orders", "billing", "worker-1", 0, [bus.ids[3]], justid=True)
    reply = post_json(
        api(group_url("orders", "billing") + "autoclaim"),
        {"consumer": "sweeper", "min_idle_ms": 50_000, "count": 2},
        api_token(operator),
    ).json()
    assert reply == {"claimed": bus.ids[:3], "skipped": [], "deleted": [], "next": None}
    assert _owners(bus.r) == {**dict.fromkeys(bus.ids[:3], "sweeper"), bus.ids[3]: "worker-1"}


# -------------------------------------------------------------------------------------------- ack


def test_ack_needs_the_confirmation_box_on_the_page(operator_client, bus) -> None:
    url = group_url("orders", "billing") + "ack/"
    response = operator_client.post(url, {"ids": [bus.ids[0]]}, follow=True)
    assert "Tick the box" in response.content.decode()
    assert bus.ids[0] in _owners(bus.r)
    response = operator_client.post(url, {"ids": [bus.ids[0]], "confirm": "1"}, follow=True)
    assert "Acknowledged 1 entry" in response.content.decode()
    assert bus.ids[0] not in _owners(bus.r)


def test_api_ack_counts_what_was_pending(operator, api_token, bus) -> None:
    url = api(group_url("orders", "billing") + "ack")
    reply = post_json(url, {"ids": [bus.ids[0], bus.ids[9]]}, api_token(operator))
    assert reply.json() == {"acked": 1}  # ids[9] was never delivered
    assert bus.r.xpending("orders", "billing")["pending"] == 3


# ----------------------------------------------------------------------------------------- rewind


def test_rewind_preview_equals_what_is_then_redelivered(operator, api_token, bus) -> None:
    r = bus.r
    r.xreadgroup("billing", "worker-1", {"orders": ">"})  # the group is at the end
    token = api_token(operator)
    url = api(group_url("orders", "billing") + "rewind")
    preview = post_json(url, {"to": bus.ids[3], "dry_run": True}, token).json()
    assert r.xinfo_groups("orders")[0]["last-delivered-id"].decode() == bus.ids[9]  # nothing changed
    done = post_json(url, {"to": bus.ids[3]}, token).json()
    assert done["last_delivered_id"] == preview["last_delivered_id"] == bus.ids[3]
    assert done["previous_last_delivered_id"] == bus.ids[9]
    redelivered = r.xreadgroup("billing", "worker-9", {"orders": ">"})[0][1]
    assert preview["will_redeliver"] == done["will_redeliver"] == len(redelivered) == 6
    assert [e[0].decode() for e in redelivered] == bus.ids[4:]
    assert {e["name"]: e["lag"] for e in map(dict, r.xinfo_groups("orders"))}[b"billing"] == 0


def test_rewind_preview_page_then_confirm(operator_client, bus) -> None:
    page = operator_client.post(group_url("orders", "billing") + "rewind/preview/", {"to": "0"})
    body = page.content.decode()
    assert page.status_code == 200
    assert '<strong id="will-redeliver">10</strong>' in body
    assert 'name="to" value="0-0"' in body
    assert bus.r.xinfo_groups("orders")[0]["last-delivered-id"].decode() == bus.ids[3]
    done = operator_client.post(group_url("orders", "billing") + "rewind/", {"to": "0-0"}, follow=True)
    assert "10 entries will be delivered again" in done.content.decode()
    assert bus.r.xinfo_groups("orders")[0]["last-delivered-id"] == b"0-0"


# ------------------------------------------------------------------------------------- group page


def test_group_page_offers_claim_ack_sweep_and_rewind_to_operators_only(operator_client, viewer_client, bus) -> None:
    body = operator_client.get(group_url("orders", "billing")).content.decode()
    assert body.count('form="pending-select"') == 4  # one checkbox per pending entry
    for action in ("claim/", "ack/", "autoclaim/confirm/", "rewind/preview/"):
        assert f'{group_url("orders", "billing")}{action}"' in body
    viewer_body = viewer_client.get(group_url("orders", "billing")).content.decode()
    assert "Claim selected" not in viewer_body


def test_an_ack_from_a_filtered_pending_list_comes_back_to_the_same_filter(operator_client, bus) -> None:
    """The form carries the page's own address, filters included, so the rows shown after the action are
    the list the operator was looking at, not the unfiltered one."""
    import html
    import re

    page = group_url("orders", "billing") + "?consumer=worker-1&count=3"
    body = operator_client.get(page).content.decode()
    form = body[body.index('id="pending-select"'):]
    [back] = re.findall(r'name="next" value="([^"]+)"', form[: form.index("</form>")])
    assert html.unescape(back) == page
    response = operator_client.post(
        group_url("orders", "billing") + "ack/", {"ids": [bus.ids[0]], "confirm": "1", "next": html.unescape(back)}
    )
    assert response.status_code == 302 and response["Location"] == page
    assert bus.ids[0] not in _owners(bus.r)
