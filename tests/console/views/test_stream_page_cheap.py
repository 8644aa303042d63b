"""The stream page's work made cheaper without changing what it shows: its query string read without a
Django form when it is one of the common shapes, and its chart panel's database read.

Expected values come from Django's own form (``EntriesForm`` through ``validated``, what every query
string went through before) and from the ORM, never from the code under test alone.
"""

from __future__ import annotations

import itertools
import random

import pytest
import redis
from django.http import QueryDict
from django.utils import timezone

from streams_app.alerts.models import Alert
from streams_app.metrics import snapshots
from streams_app.metrics.models import StreamMirror, name_hash
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads.limits import DEFAULT_PAGE, MAX_PAGE
from streams_app.templatetags import metrics as metrics_tags
from streams_app.views.forms import EntriesForm, entries_params, validated
from tests.console.helpers import CONN
from tests.console.metrics.test_panel_alerts_read import open_alert

ORDERS = [None, "", "desc", "asc", "DESC", " asc", "newest"]
IDS = [None, "", "1700000000000-0", "1700000000000", "0-1", "x", " 5-0", "18446744073709551616-0"]
COUNTS = [None, "", "1", "50", "050", str(MAX_PAGE), str(MAX_PAGE + 1), "0", "-1", "+5", " 7", "7 ", "5.0", "²", "1e2"]
ATS = [None, "", "2026-11-22T10:00Z", "1700000000000-0", "yesterday"]


def _form_answer(data: QueryDict) -> tuple[str, object]:
    try:
        return "ok", validated(EntriesForm, data)
    except InvalidArgument as exc:
        return "refused", str(exc)


def _answer(data: QueryDict) -> tuple[str, object]:
    try:
        return "ok", entries_params(data)
    except InvalidArgument as exc:
        return "refused", str(exc)


def _query(**params: str | list[str] | None) -> QueryDict:
    data = QueryDict(mutable=True)
    for name, value in params.items():
        if value is None:
            continue
        data.setlist(name, value if isinstance(value, list) else [value])
    return data


def test_the_common_query_strings_read_as_the_form_reads_them() -> None:
    for order, count in itertools.product(ORDERS, COUNTS):
        for extra in ({}, {"groups_sort": "lag", "window": "24h"}):
            data = _query(order=order, count=count, **extra)
            assert _answer(data) == _form_answer(data), data.urlencode()


def test_cursors_and_odd_values_give_the_forms_answer_and_message() -> None:
    rng = random.Random(32)
    cases = [
        _query(after=a, before=b, at=t, order=o, count=c)
        for a, b, t, o, c in itertools.product(IDS[:4], IDS[:3], ATS[:3], ORDERS[:4], COUNTS[:4])
    ]
    cases += [
        _query(**{name: rng.choice(values) for name, values in
                  (("after", IDS), ("before", IDS), ("at", ATS), ("order", ORDERS), ("count", COUNTS))})
        for _ in range(300)
    ]
    # A repeated parameter: the last value counts, as the form's widgets read it.
    cases += [_query(count=["5", "abc"]), _query(count=["abc", "5"]), _query(order=["asc", "desc"]),
              _query(at=["x", ""]), _query(at=["", "x"]), _query(after=["1-0", "2-0"], before=[""])]
    refused = 0
    for data in cases:
        expected = _form_answer(data)
        refused += expected[0] == "refused"
        assert _answer(data) == expected, data.urlencode()
    assert refused > 50  # the cases do reach the form's refusals


def test_no_parameters_is_the_newest_page_of_the_default_size() -> None:
    assert entries_params(QueryDict("")) == {
        "order": "desc", "after": None, "before": None, "at": None, "count": DEFAULT_PAGE,
    }


@pytest.mark.parametrize("count", ["0", str(MAX_PAGE + 1), "many"])
def test_a_bad_count_is_refused_with_the_forms_words(count: str) -> None:
    with pytest.raises(InvalidArgument, match="count"):
        entries_params(QueryDict(f"count={count}"))


def _orm_fields(row: StreamMirror | None) -> dict | None:
    if row is None:
        return None
    return {f.attname: (type(getattr(row, f.attname)), getattr(row, f.attname)) for f in StreamMirror._meta.concrete_fields}


@pytest.mark.parametrize("alert", [False, True])
def test_the_chart_panels_mirror_row_is_what_the_orm_reads(db, r: redis.Redis, alert: bool) -> None:
    """Read by a cursor and made a model with the backend's converters: every column equal to the ORM's
    read, of the same type (JSON lists, datetimes, booleans), with and without an open alert, and None
    for a stream with no row (with an alert that outlived its row, the alert still comes back)."""
    r.xadd("orders", {"a": "1"})
    r.xadd("orders:dlq", {"error": "boom"})
    snapshots.snapshot_take(tick=timezone.now().replace(microsecond=0))
    keys = [b"orders", b"orders:dlq", b"never-seen"]
    if alert:
        for key in keys:
            open_alert(key, f"rule-{key.decode()}")
    for key in keys:
        mirror, alerts = metrics_tags._stream_mirror_and_alerts(CONN, key)
        expected = StreamMirror.objects.filter(connection=CONN, key_hash=name_hash(key)).first()
        assert _orm_fields(mirror) == _orm_fields(expected), key
        assert (expected is None) == (key == b"never-seen")
        assert {a.pk for a in alerts} == set(
            Alert.objects.filter(connection=CONN, key_hash=name_hash(key), state=Alert.State.OPEN).values_list("pk", flat=True)
        )
        assert bool(alerts) == alert
    dlq = StreamMirror.objects.get(connection=CONN, key_hash=name_hash(b"orders:dlq"))
    assert dlq.is_dlq and dlq.dlq_sources == ["orders"]  # a JSON column went through its converter


def test_an_entrys_time_text_is_datetimes_to_the_millisecond() -> None:
    """The rows' time (UTC to the millisecond) against datetime's own ``isoformat``, over random IDs from
    the epoch to past the year 9999 (shown as datetime's last millisecond) and malformed ones."""
    from datetime import UTC, datetime, timedelta

    from streams_app.views.presenters import _id_time_text

    last = datetime.max.replace(tzinfo=UTC)

    def expected(entry_id: str) -> str:
        head = entry_id.split("-", 1)[0]
        if not (head.isascii() and head.isdecimal()):
            return ""
        try:
            moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=int(head))
        except OverflowError:
            moment = last
        return moment.replace(tzinfo=None).isoformat(" ", "milliseconds")

    rng = random.Random(7)
    past_9999 = 253402300800000
    ids = ["0-0", "1-0", "999-1", "1767225600000-1", f"{past_9999 - 1}-0", f"{past_9999}-0", f"{2**64 - 1}-3",
           "x-1", "-5", "²-0", "١٢-0", "12", "0012-0"]
    ids += [f"{rng.randrange(0, past_9999)}-{rng.randrange(0, 9)}" for _ in range(3000)]
    ids += [f"{rng.randrange(past_9999, 2**64)}-0" for _ in range(200)]
    for entry_id in ids:
        assert _id_time_text(entry_id) == expected(entry_id), entry_id


def test_the_navigation_bar_made_once_follows_what_it_is_made_from() -> None:
    """The bar is kept per process: a new script prefix, another set of connections, another page
    connection or screen each give the bar ``reverse()`` gives for them, never the one kept before."""
    from types import SimpleNamespace

    from django.template import Context, Template
    from django.urls import reverse, set_script_prefix

    from streams_app.redis_ops.client import Connection

    def bar(names: list[str], conn: str | None = None, here: str | None = None) -> str:
        context = {"console_connections": [Connection(name=n, host="h", port=1, db=0) for n in names], "conn": conn,
                   "request": SimpleNamespace(resolver_match=SimpleNamespace(url_name=here))}
        return Template("{% load console %}{% nav_links %}").render(Context(context))

    first = bar(["default"])
    assert first == bar(["default"])
    assert f'href="{reverse("streams", kwargs={"conn": "default"})}"' in first
    try:
        set_script_prefix("/console/")
        moved = bar(["default"])
        assert f'href="{reverse("alerts")}"' in moved and reverse("alerts").startswith("/console/")
        assert moved != first
    finally:
        set_script_prefix("/")
    assert bar(["default"]) == first
    two = bar(["default", "other"], conn="other")
    assert f'href="{reverse("streams", kwargs={"conn": "other"})}" class="active"' in two
    assert f'href="{reverse("dlq-list", kwargs={"conn": "other"})}"' in two
    assert 'class="active">Alerts' not in two and 'class="active">Alerts' in bar(["default"], here="alerts")
