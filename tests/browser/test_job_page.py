"""A job's page in headless Chromium: while the job runs the page follows it live, and
when it ends Cancel and Nudge leave the page without a reload; a job whose total is unknown shows what
was done so far and never a percentage.

The job is a database row the test moves from ``running`` to ``done`` as a worker would; the page must
follow on its own (a marker set on ``window`` before the change is still there after it: no reload).
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from streams_app.jobs.models import Job
from tests.browser.conftest import login_through_form
from tests.console.helpers import CONN

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_cancel_and_nudge_leave_a_live_job_page_when_the_job_ends(page, operator, asgi_server) -> None:
    from playwright.sync_api import expect

    job = Job.objects.create(kind="dlq.requeue_matching", connection=CONN, created_by=operator, state="running",
                             done=45, total=None, started_at=timezone.now(),
                             parameters={"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "5-0"})
    login_through_form(page, operator, asgi_server)
    page.goto(f"/jobs/{job.pk}/")
    progress = page.locator("#job-progress")
    expect(progress).to_contain_text("45 entries so far")
    assert "%" not in progress.inner_text()
    expect(page.get_by_role("button", name="Cancel")).to_be_visible()
    expect(page.get_by_role("button", name="Nudge (re-enqueue)")).to_be_visible()
    page.evaluate("window.stillTheSamePage = true")

    Job.objects.filter(pk=job.pk).update(state="done", done=52, finished_at=timezone.now())

    expect(page.locator("#job-state")).to_have_text("done")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.get_by_role("button", name="Nudge (re-enqueue)")).to_have_count(0)
    expect(progress).to_contain_text("52 entries")
    assert "%" not in progress.inner_text()
    assert page.evaluate("window.stillTheSamePage") is True  # followed live, not reloaded


def test_a_viewer_cancels_their_own_job_from_its_page(page, viewer, asgi_server) -> None:
    from playwright.sync_api import expect

    job = Job.objects.create(kind="export", connection=CONN, created_by=viewer, state="running", done=1000,
                             total=5000, started_at=timezone.now(),
                             parameters={"key": b"orders".hex(), "key_text": "orders", "format": "csv"})
    login_through_form(page, viewer, asgi_server)
    page.goto(f"/jobs/{job.pk}/")
    expect(page.locator("#job-progress")).to_contain_text("1000 of 5000 entries (20%)")
    expect(page.get_by_role("button", name="Nudge (re-enqueue)")).to_have_count(0)  # resuming is an operator's
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#job-state")).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    assert Job.objects.get(pk=job.pk).state == "cancelled"
