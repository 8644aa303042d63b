"""How many jobs one user may hold, and who may cancel a job.

A viewer's two costly exports held both Celery workers while an operator's replay waited. Each user
now holds at most ``BUSCONSOLE_JOBS_PER_USER`` jobs queued or running (1 by default): one more is
refused with a 409 that says why (the JSON error on the API, a message on the page), audited as a
``denied`` attempt; and every user may cancel their own jobs, operators and admins anyone's.

No worker runs here: the jobs stay queued, which is what the limit counts. The counts asserted come
from the database rows the test reads back, the outcomes from the audit rows.
"""

from __future__ import annotations

import threading

import pytest
import redis
from django.db import connections

from streams_app import services
from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from tests.console.helpers import CONN

pytestmark = pytest.mark.django_db(transaction=True)

EXPORT = f"/api/v1/c/{CONN}/streams/orders/export"


@pytest.fixture
def stream(r: redis.Redis) -> list[str]:
    return [r.xadd("orders", {"type": "order.created", "n": str(n)}).decode() for n in range(5)]


def test_a_second_job_of_the_same_user_is_refused_with_409_and_audited(
    stream, viewer_client, viewer, operator, settings
) -> None:
    assert settings.BUSCONSOLE_JOBS_PER_USER == 1  # the default
    first = viewer_client.post(EXPORT, {"format": "ndjson"}, content_type="application/json")
    assert first.status_code == 202
    job_id = first.json()["job"]

    refused = viewer_client.post(EXPORT, {"format": "csv"}, content_type="application/json")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "too_many_jobs"
    assert f"job {job_id}" in error["message"] and "BUSCONSOLE_JOBS_PER_USER" in error["message"]
    assert Job.objects.filter(created_by=viewer).count() == 1
    rows = list(AuditEvent.objects.filter(action="export.job").order_by("pk").values_list("outcome", "error"))
    assert [outcome for outcome, _ in rows] == ["ok", "denied"]
    assert "BUSCONSOLE_JOBS_PER_USER" in rows[1][1]

    # The page's button: the same refusal, said on the page, and nothing started.
    page = viewer_client.post(f"/c/{CONN}/streams/orders/export/job/", {"format": "csv", "from": "-", "to": "+"})
    assert page.status_code == 409
    assert "BUSCONSOLE_JOBS_PER_USER" in page.content.decode()
    assert Job.objects.filter(created_by=viewer).count() == 1

    # Someone else's jobs are theirs: an operator still starts one.
    other = services.stream_replay(user=operator, conn=CONN, key=b"orders", start=stream[0], end=stream[1],
                                   target=b"copy")
    assert other.state == "queued"

    # Once the first has ended (here: cancelled by its owner), the next is accepted.
    assert viewer_client.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200
    assert viewer_client.post(EXPORT, {"format": "csv"}, content_type="application/json").status_code == 202


def test_the_limit_holds_for_requests_at_the_same_moment(stream, viewer, settings) -> None:
    """Counted and created under one lock: eight concurrent requests of one user start exactly one job."""
    settings.BUSCONSOLE_JOBS_PER_USER = 1
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def ask() -> None:
        try:
            start.wait(10)
            services.stream_export_job(user=viewer, conn=CONN, key=b"orders", fmt="ndjson")
            outcomes.append("started")
        except Exception as exc:  # the refusal, whatever its type: the count below decides
            outcomes.append(type(exc).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert Job.objects.filter(created_by=viewer).count() == 1
    assert sorted(outcomes) == ["JobLimitReached"] * 7 + ["started"]
    assert AuditEvent.objects.filter(action="export.job", outcome="denied").count() == 7


def test_a_page_action_over_the_limit_says_so_on_the_page(stream, operator_client, operator) -> None:
    services.stream_replay(user=operator, conn=CONN, key=b"orders", start=stream[0], end=stream[1], target=b"copy")
    response = operator_client.post(
        f"/c/{CONN}/streams/orders/replay/", {"start": stream[0], "end": stream[1], "target": "copy"}, follow=True
    )
    assert "BUSCONSOLE_JOBS_PER_USER" in response.content.decode()
    assert Job.objects.filter(created_by=operator).count() == 1
    assert AuditEvent.objects.filter(action="replay", outcome="denied").count() == 1


def test_a_viewer_cancels_their_own_job_but_not_anothers(stream, viewer_client, viewer, operator) -> None:
    own = services.stream_export_job(user=viewer, conn=CONN, key=b"orders", fmt="ndjson")
    theirs = services.stream_replay(user=operator, conn=CONN, key=b"orders", start=stream[0], end=stream[1],
                                    target=b"copy")
    assert viewer_client.post(f"/api/v1/jobs/{theirs.pk}/cancel").status_code == 403
    assert viewer_client.post(f"/jobs/{theirs.pk}/cancel/").status_code == 403
    assert Job.objects.get(pk=theirs.pk).state == "queued"

    assert viewer_client.post(f"/jobs/{own.pk}/cancel/").status_code == 302
    assert Job.objects.get(pk=own.pk).state == "cancelled"
    assert list(AuditEvent.objects.filter(action__startswith="job.").order_by("pk").values_list("action", "outcome")) == [
        ("job.cancel.any", "denied"), ("job.cancel.any", "denied"), ("job.cancel", "ok"),
    ]


def test_operators_and_admins_cancel_anyones_job(stream, viewer, operator_client, admin_client_) -> None:
    first = services.stream_export_job(user=viewer, conn=CONN, key=b"orders", fmt="ndjson")
    assert operator_client.post(f"/api/v1/jobs/{first.pk}/cancel").json()["state"] == "cancelled"
    second = services.stream_export_job(user=viewer, conn=CONN, key=b"orders", fmt="csv")
    assert admin_client_.post(f"/jobs/{second.pk}/cancel/").status_code == 302
    assert Job.objects.get(pk=second.pk).state == "cancelled"
    assert list(AuditEvent.objects.filter(action__startswith="job.").values_list("action", "outcome")) == [
        ("job.cancel.any", "ok"), ("job.cancel.any", "ok"),
    ]


def test_a_read_only_console_lets_a_viewer_stop_their_export(stream, viewer_client, viewer, settings) -> None:
    """Read-only mode protects the monitored Redis; an export runs there, and a cancel changes nothing in it."""
    settings.BUSCONSOLE_READ_ONLY = True
    own = services.stream_export_job(user=viewer, conn=CONN, key=b"orders", fmt="ndjson")
    assert viewer_client.post(f"/api/v1/jobs/{own.pk}/cancel").json()["state"] == "cancelled"
