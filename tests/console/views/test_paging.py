"""The one "older than" pager of the audit, jobs and alerts lists, walked to the end over real rows.

The expected pages are slices of a plain Python list of the primary keys, newest first.
"""

from __future__ import annotations

import pytest
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.views.paging import newest_first


def _events(n: int) -> list[int]:
    return [AuditEvent.objects.create(action=f"a{i}", outcome="ok", connection="default").pk for i in range(n)]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8])
def test_walking_the_pages_visits_every_row_once_newest_first(db, size: int) -> None:
    pks = _events(7)
    expected = [sorted(pks, reverse=True)[i : i + size] for i in range(0, len(pks), size)]
    pages, before = [], None
    while True:
        page = newest_first(AuditEvent.objects.all(), before=before, size=size)
        pages.append([e.pk for e in page.rows])
        if page.older is None:
            break
        before = page.older
    assert pages == expected


def test_filters_and_the_cursor_combine(db) -> None:
    pks = _events(6)
    evens = AuditEvent.objects.filter(pk__in=pks[::2])
    page = newest_first(evens, before=pks[4], size=5)  # the cursor itself is not shown again
    assert ([e.pk for e in page.rows], page.older) == ([pks[2], pks[0]], None)


def test_an_empty_list_has_no_older_page(db) -> None:
    assert newest_first(AuditEvent.objects.all(), before=None, size=50) == ([], None)


def test_the_audit_api_pages_through_the_same_cursor(db, admin_client_: Client) -> None:
    pks = _events(5)
    first = admin_client_.get("/api/v1/audit/?count=2").json()
    assert [e["id"] for e in first["events"]] == [pks[4], pks[3]] and first["next"] == pks[3]
    last = admin_client_.get(f"/api/v1/audit/?count=2&before={pks[1]}").json()
    assert [e["id"] for e in last["events"]] == [pks[0]] and last["next"] is None
