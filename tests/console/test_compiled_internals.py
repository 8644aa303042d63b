"""The ORM internals ``streams_app.perf.compiled`` replays are checked, and without them the pages read through
the plain ORM and show the same rows.

The pinned Django must pass the check (an upgrade that changes one fails here, naming it). A changed
internal is simulated on the real class: ``SQLCompiler.as_sql`` wrapped under another signature (the ORM
still works through it, so only the check can tell). The expected rows come from the ORM's own reads.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import django
import pytest
import redis
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import QuerySet
from django.db.models.sql import Query
from django.db.models.sql.compiler import SQLCompiler
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from streams_app.accounts import role_backend
from streams_app.accounts.roles import Role, role_of
from streams_app.alerts.models import Alert
from streams_app.metrics import snapshots
from streams_app.metrics.models import StreamMirror, name_hash
from streams_app.perf import compiled
from streams_app.templatetags import metrics as metrics_tags
from tests.console.conftest import make_user
from tests.console.helpers import CONN
from tests.console.metrics.test_panel_alerts_read import open_alert
from tests.servers import REPO


def _forget() -> None:
    """Drop every cached verdict and compiled query, so the next use checks again."""
    compiled.internals_check.cache_clear()
    role_backend._user_with_role.cache_clear()
    metrics_tags._mirror_and_marker.cache_clear()


@pytest.fixture
def fresh() -> Iterator[None]:
    _forget()
    yield
    _forget()


def test_the_replayed_internals_are_there_on_the_pinned_django(db, fresh) -> None:
    problem = compiled.internals_problem()
    assert problem is None, f"Django {django.get_version()} changed what compiled.py replays: {problem}"
    # Each query replayed in the product compiles to SQL its markers land in, exactly as expected.
    assert role_backend._user_with_role("default") is not None
    assert metrics_tags._mirror_and_marker("default") is not None


class _NoCompiler:
    """A Query as it would be if ``get_compiler`` were renamed."""


class _OtherCompiler:
    def as_sql(self, *, compact: bool = False) -> tuple[str, list]:
        return "", []


class _NoQueryProperty:
    query = None  # a plain attribute, not the property QuerySet has


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"query_class": _NoCompiler}, "Query.get_compiler"),
        ({"compiler_class": _OtherCompiler}, "SQLCompiler.as_sql"),
        ({"queryset_class": _NoQueryProperty}, "QuerySet.query"),
    ],
)
def test_a_changed_internal_is_named(changed: dict, named: str) -> None:
    kinds = {"query_class": Query, "compiler_class": SQLCompiler, "queryset_class": QuerySet} | changed
    problem = compiled.internals_problem(**kinds)
    assert problem is not None and named in problem


def _orm_mirror(key: bytes) -> dict:
    return StreamMirror.objects.filter(connection=CONN, key_hash=name_hash(key)).values().get()


def _as_dict(row: StreamMirror) -> dict:
    return {f.attname: getattr(row, f.attname) for f in StreamMirror._meta.concrete_fields}


def test_with_the_compiler_changed_the_pages_read_what_the_orm_reads(
    db, r: redis.Redis, fresh, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    r.xadd("orders", {"a": "1"})
    snapshots.snapshot_take(tick=timezone.now().replace(microsecond=0))
    open_alert(b"orders", "first-rule")
    open_alert(b"orders", "second-rule")
    operator = make_user("olga-fence", groups=("operator",))
    open_alerts = set(
        Alert.objects.filter(state=Alert.State.OPEN, connection=CONN, key_hash=name_hash(b"orders"))
        .values_list("pk", flat=True)
    )
    assert len(open_alerts) == 2

    mirror_on, alerts_on = metrics_tags._stream_mirror_and_alerts(CONN, b"orders")
    user_on = role_backend.ConsoleModelBackend().get_user(operator.pk)

    original = SQLCompiler.as_sql

    def as_sql(self, *args, **kwargs):  # the same answer under a signature the check does not know
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLCompiler, "as_sql", as_sql)
    _forget()
    with caplog.at_level(logging.WARNING, logger="streams_app.perf.compiled"), CaptureQueriesContext(connection) as q:
        mirror_off, alerts_off = metrics_tags._stream_mirror_and_alerts(CONN, b"orders")
        user_off = role_backend.ConsoleModelBackend().get_user(operator.pk)
    warnings = [rec for rec in caplog.records if rec.name == "streams_app.perf.compiled" and rec.levelno == logging.WARNING]
    assert len(warnings) == 1, [rec.getMessage() for rec in warnings]
    assert "SQLCompiler.as_sql" in warnings[0].getMessage()
    assert f"Django {django.get_version()}" in warnings[0].getMessage()
    assert not any("UNION" in s["sql"] for s in q.captured_queries)  # the plain ORM queries ran, not the replay

    expected = _orm_mirror(b"orders")
    assert mirror_on is not None and mirror_off is not None
    assert _as_dict(mirror_on) == _as_dict(mirror_off) == expected
    assert {a.pk for a in alerts_on} == {a.pk for a in alerts_off} == open_alerts
    assert user_on is not None and user_off is not None and user_on.pk == user_off.pk == operator.pk
    assert role_of(user_on) is role_of(user_off) is role_of(User.objects.get(pk=operator.pk)) is Role.OPERATOR
    assert role_backend.ConsoleModelBackend().get_user(operator.pk + 1000) is None
    assert role_backend.ConsoleModelBackend().get_user("not-a-number") is None

    # The whole page, session user included, through the fallback.
    client = Client()
    client.force_login(operator)
    response = client.get("/c/default/streams/orders/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-chart="length"' in html and "first-rule" in html and "second-rule" in html


_STARTUP = """
import django
from django.db.models.sql.compiler import SQLCompiler
original = SQLCompiler.as_sql
SQLCompiler.as_sql = lambda self, *args, **kwargs: original(self, *args, **kwargs)
django.setup()
"""


@pytest.mark.slow
def test_a_changed_internal_is_logged_at_start_up() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    done = subprocess.run([sys.executable, "-c", _STARTUP], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "streams_app.perf.compiled" in line]
    assert len(lines) == 1 and "WARNING" in lines[0] and "SQLCompiler.as_sql takes (self, args, kwargs)" in lines[0]
    assert f"Django {django.get_version()}" in lines[0]
