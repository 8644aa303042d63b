"""The streams page and the overview in family mode: above BUSCONSOLE_FAMILY_MODE_KEYS keys (as the newest
stored family rows count them) the streams page lists FAMILY_ROWS families a page (most keys first, each
linking to its members page, names escaped) above the mirror's per-stream rows, and the overview shows each
connection's largest families; the figures are the stored rows', the size does not grow with the families."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
import redis
from django.test import Client
from django.utils import timezone

from streams_app.metrics import mirror
from streams_app.metrics.models import FamilySample, name_hash
from tests.console.helpers import CONN, seg, stream_url

SHOWN = 25  # streams_app.views.streams.FAMILY_ROWS, restated: the page's bound is the contract


def _store(count: int, *, keys_total: int, at=None) -> list[FamilySample]:
    at = at or timezone.now().replace(microsecond=0)
    rows = [
        FamilySample(connection=CONN, family=f"fam{n}:*", family_hash=name_hash(f"fam{n}:*".encode()), kind="detected",
                     at=at, keys=10_000 + n, entries=20_000 + n, pending=n % 3, dlq_depth=n % 5, rate_per_s=n / 2,
                     complete=True, looked_at=keys_total, keys_total=keys_total)
        for n in range(count)
    ]
    hostile = "<b>x</b>:*"
    rows.append(FamilySample(connection=CONN, family=hostile, family_hash=name_hash(hostile.encode()),
                             kind="detected", at=at, keys=900_000, entries=900_000, complete=True,
                             looked_at=keys_total, keys_total=keys_total))
    return FamilySample.objects.bulk_create(rows)


@pytest.fixture
def members(db, r: redis.Redis, settings) -> None:
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 1000
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w", {"orders": ">"})
    r.xadd("progress:7", {"step": "1"})
    mirror.mirror_sync(conn=CONN)


def _family_cells(text: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr data-family="([^"]+)">\s*<td>.*?</td>\s*<td class="num">(\d+)</td>', text, re.S)


def test_the_streams_page_lists_families_then_the_members_that_matter(
    viewer_client: Client, members, settings
) -> None:
    _store(40, keys_total=1_000_000, at=timezone.now() - timedelta(seconds=30))  # an older tick: not shown
    newest = _store(300, keys_total=1_000_000)
    page = viewer_client.get(f"/c/{CONN}/streams/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "data-family-mode" in text and "holds 1000000 keys" in text
    cells = _family_cells(text)
    expected_all = sorted(newest, key=lambda s: (-s.keys, s.family))
    expected = expected_all[:SHOWN]
    assert cells == [(s.family.replace("<", "&lt;").replace(">", "&gt;"), str(s.keys)) for s in expected]
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;:*" in text  # a family's name is escaped
    assert f'href="/c/{CONN}/families/{seg("fam299:*")}/"' in text and "1–25 shown" in text
    [more] = re.findall(r'<a data-families-next href="([^"]+)"', text)
    second = viewer_client.get(f"/c/{CONN}/streams/" + unescape(more)).content.decode()
    assert _family_cells(second) == [(s.family, str(s.keys)) for s in expected_all[SHOWN : 2 * SHOWN]]
    assert "26–50 shown" in second and "data-families-prev" in second
    # the per-stream rows below are the mirror's
    assert f'href="{stream_url("orders")}"' in text and f'href="{stream_url("progress:7")}"' in text

    filtered = viewer_client.get(f"/c/{CONN}/streams/", {"match": "fam29*"}).content.decode()
    assert sorted(glob for glob, _ in _family_cells(filtered)) == sorted(
        ["fam29:*", *(f"fam{n}:*" for n in range(290, 300))])

    # three times the families: the same rows on screen, about the same size
    _store(900, keys_total=1_000_000, at=timezone.now() + timedelta(seconds=10))
    bigger = viewer_client.get(f"/c/{CONN}/streams/").content.decode()
    assert len(_family_cells(bigger)) == SHOWN and len(bigger) < len(text) * 1.1

    # at or below the threshold the page lists streams only
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 1_000_000
    plain = viewer_client.get(f"/c/{CONN}/streams/").content.decode()
    assert "data-family-mode" not in plain and f'href="{stream_url("orders")}"' in plain


def test_the_overview_shows_each_connections_largest_families(viewer_client: Client, members) -> None:
    _store(30, keys_total=1_000_000)
    text = viewer_client.get("/").content.decode()
    assert f'data-overview-families="{CONN}"' in text
    cells = _family_cells(text)
    assert cells[0] == ("&lt;b&gt;x&lt;/b&gt;:*", "900000") and len(cells) == 10
    assert cells[1:] == [(f"fam{n}:*", str(10_000 + n)) for n in range(29, 20, -1)]
    assert "31 families" in text
