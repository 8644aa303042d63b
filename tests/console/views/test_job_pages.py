"""The jobs pages: the list, one job's live progress (whole page or its htmx partial), cancel and resume.

Jobs are created directly in the database with known counts, so the page must show exactly those
numbers; cancel and resume are refused to viewers and each press leaves one audit row.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

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
        ("job.cancel.any", "denied"), ("job.cancel", "ok"), ("job.resume", "ok")  # a viewer's cancel of another's job
    ]


def test_a_pipeline_job_counts_steps_and_shows_no_empty_connection_or_stream(viewer_client, operator, r) -> None:
    job = Job.objects.create(kind="pipeline", connection="", created_by=operator, total=7, done=7, state="done",
                             parameters={"key": "", "key_text": ""})
    body = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<strong id="job-done">7</strong> of <span id="job-total">7</span> <span id="job-unit">steps</span>' in body
    assert "entries" not in body.split('<section id="job-progress"')[1].split("</section>")[0]
    parameters = body.split("<h2>Parameters</h2>")[1].split("</table>")[0]
    assert "<th>Connection</th>" not in parameters and "<th>Stream</th>" not in parameters
    assert "Every configured connection" in parameters
    assert not re.search(r"<td>\s*</td>|<td><span class=\"mono\"></span></td>", parameters)  # no empty cell
    listing = viewer_client.get("/jobs/").content.decode()
    row = listing.split(f'href="/jobs/{job.pk}/"')[1].split("</tr>")[0]
    assert "steps" in row and not re.search(r"<td>\s*</td>|<td class=\"mono small\"></td>", row)


def test_a_replay_job_shows_the_human_time_of_its_range_bounds(viewer_client, operator, r) -> None:
    start, end = "1795458500000-0", f"1795458509000-{2**64 - 1}"
    job = Job.objects.create(kind="replay", connection=CONN, created_by=operator, state="queued",
                             parameters={"key": b"orders".hex(), "key_text": "orders", "start": start, "end": end,
                                         "target": b"orders".hex(), "target_text": "orders", "match": []})
    body = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<span id="job-unit">entries</span>' in body
    cell = body.split('<td id="job-range">')[1].split("</td>")[0]
    humans = []
    for bound in (start, end):
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=int(bound.split("-")[0]))
        humans.append(moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC")
        assert f'title="{bound}"' in cell  # the exact ID stays on hover
    # the end's sequence is the largest there is: the range reaches the end of its millisecond
    assert f"from {humans[0]}" in cell and f"to the end of {humans[1]}" in cell
    assert str(2**64 - 1) not in cell.replace(f'title="{end}"', "")  # never shown raw


def test_ids_beside_their_time_are_escaped_like_any_value(viewer_client, operator, r) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, state="queued",
                             parameters={"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "<b>5</b>-0"})
    body = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "<b>5</b>" not in body and '<code class="stream-id">&lt;b&gt;5&lt;/b&gt;-0</code>' in body
