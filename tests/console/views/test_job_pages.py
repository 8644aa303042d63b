"""The jobs pages: the list, one job's live progress (whole page or its htmx partial), cancel and resume.

Jobs are created directly in the database with known counts, so the page must show exactly those
numbers; cancel and resume are refused to viewers and each press leaves one audit row.
"""

from __future__ import annotations

from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from tests.console.helpers import CONN


def test_jobs_pages(viewer_client, operator, r) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, total=10, done=4,
                             state="running", parameters={"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "5-0"})
    listing = viewer_client.get("/jobs/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in listing
    page = viewer_client.get(f"/jobs/{job.pk}/")
    body = page.content.decode()
    assert '<strong id="job-done">4</strong>' in body
    assert 'hx-trigger="every 1s"' in body  # live while running
    partial = viewer_client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<section id="job-progress"')
    Job.objects.filter(pk=job.pk).update(state="done", done=10)
    assert 'hx-trigger' not in viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert viewer_client.get("/jobs/999999/").status_code == 404


def test_operator_cancels_and_resumes_a_job(operator_client, viewer_client, operator, r) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, state="queued",
                             parameters={"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "5-0"})
    assert viewer_client.post(f"/jobs/{job.pk}/cancel/").status_code == 403
    operator_client.post(f"/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.state == "cancelled"
    operator_client.post(f"/jobs/{job.pk}/resume/")
    job.refresh_from_db()
    assert job.state == "queued"
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "outcome")) == [
        ("job.cancel", "denied"), ("job.cancel", "ok"), ("job.resume", "ok")
    ]
