"""Replay of a stream range: the dry-run count and the job that copies the matching entries.

The count is checked against a plain-Python count over the entries the test wrote; the copies are read
back with XRANGE on the target, each carrying ``_replayed_from`` with the ID it was copied from.
"""

from __future__ import annotations

from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from tests.console.helpers import api, post_json, stream_url


def test_replay_dry_run_counts_like_plain_python_and_changes_nothing(operator, api_token, r) -> None:
    ids = [r.xadd("events", {"type": "a" if i % 3 else "b", "n": str(i)}).decode() for i in range(30)]
    reply = post_json(
        api(stream_url("events") + "replay"),
        {"start": ids[4], "end": ids[25], "match": {"type": "b"}, "dry_run": True},
        api_token(operator),
    ).json()
    expected = sum(1 for i in range(4, 26) if i % 3 == 0)
    assert reply == {"count": expected, "start": ids[4], "end": ids[25], "target": "events"}
    assert r.xlen("events") == 30


def test_replay_page_counts_first_then_starts_a_job_that_copies(operator_client, r) -> None:
    ids = [r.xadd("events", {"type": "a" if i % 2 else "b", "n": str(i)}).decode() for i in range(12)]
    page = operator_client.post(stream_url("events") + "replay/count/", {"start": "-", "end": "+", "target": "copy", "match": "type=b"})
    body = page.content.decode()
    assert '<strong id="replay-count">6</strong>' in body
    assert f'name="end" value="{ids[-1]}"' in body
    assert not r.exists("copy")
    started = operator_client.post(stream_url("events") + "replay/", {"start": "0-0", "end": ids[-1], "target": "copy", "match": "type=b"})
    job = Job.objects.get()
    assert started["Location"] == f"/jobs/{job.pk}/"
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.done, job.total) == ("done", 6, 6)
    copies = r.xrange("copy")
    assert [f[b"_replayed_from"].decode() for _, f in copies] == ids[0::2]
    assert all(f[b"type"] == b"b" for _, f in copies)
