"""The job page's numbers and buttons: no percentage without a total, and no Cancel or
Nudge once the job has ended, in the page and in the live partial htmx swaps in every second.

Jobs are rows made here with known counts; what the page must say follows from those numbers.
"""

from __future__ import annotations

import re

import pytest

from streams_app.jobs.models import Job
from tests.console.helpers import CONN

pytestmark = pytest.mark.django_db

PARAMS = {"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "5-0"}


def _progress(client, job: Job) -> str:
    """The live section as htmx fetches it."""
    return client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()


@pytest.mark.parametrize("state", ["running", "done", "cancelled"])
def test_a_job_with_no_known_total_shows_no_percentage(viewer_client, operator, state: str) -> None:
    job = Job.objects.create(kind="dlq.requeue_matching", connection=CONN, created_by=operator, done=45,
                             total=None, state=state, parameters=PARAMS)
    section = _progress(viewer_client, job)
    text = re.sub(r"<[^>]+>", "", section)
    assert "%" not in text and "?" not in text
    assert '<strong id="job-done">45</strong> <span id="job-unit">entries</span>' in section
    said = {"running": "so far", "done": "", "cancelled": "before it stopped"}[state]
    assert f'<span id="job-total-unknown">{said}' in section
    if state == "running":
        assert "<progress" in section and "value=" not in section.split("<progress")[1].split(">")[0]
    else:
        assert "<progress" not in section  # a full bar would say 100% too


def test_a_job_with_a_total_shows_its_percentage(viewer_client, operator) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, done=45, total=60,
                             state="running", parameters=PARAMS)
    section = _progress(viewer_client, job)
    assert '<strong id="job-done">45</strong> of <span id="job-total">60</span>' in section
    assert '<span id="job-percent">(75%)</span>' in section  # 45 / 60
    assert '<progress class="job" max="60" value="45">' in section


def test_cancel_and_nudge_live_in_the_swapped_section_and_leave_when_the_job_ends(operator_client, operator) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, done=4, total=10,
                             state="running", parameters=PARAMS)
    running = _progress(operator_client, job)
    assert f'action="/jobs/{job.pk}/cancel/"' in running and "Nudge" in running
    Job.objects.filter(pk=job.pk).update(state="done", done=10)
    ended = _progress(operator_client, job)
    assert "/cancel/" not in ended and "/resume/" not in ended and "hx-trigger" not in ended
    Job.objects.filter(pk=job.pk).update(state="cancelled")
    stopped = _progress(operator_client, job)
    assert "/cancel/" not in stopped and "Nudge" not in stopped
    assert f'action="/jobs/{job.pk}/resume/"' in stopped and ">Resume<" in stopped  # it may go on later


def test_a_viewer_sees_cancel_on_their_own_running_job_only(viewer_client, viewer, operator) -> None:
    own = Job.objects.create(kind="export", connection=CONN, created_by=viewer, state="running",
                             parameters={"key": b"orders".hex(), "key_text": "orders", "format": "csv"})
    theirs = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, state="running",
                                parameters=PARAMS)
    assert f'action="/jobs/{own.pk}/cancel/"' in viewer_client.get(f"/jobs/{own.pk}/").content.decode()
    body = viewer_client.get(f"/jobs/{theirs.pk}/").content.decode()
    assert "/cancel/" not in body and "/resume/" not in body
