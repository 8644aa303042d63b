"""A range bound at the end of a millisecond reads as a time everywhere it is shown.

A replay "to 12:30:00" is stored as ``<ms>-18446744073709551615`` (every entry of that millisecond
included), and the dry run, the flash, the job page and the audit log showed that number. They now say
"to the end of <date> 12:30:00.000 UTC"; the stored value (the form's hidden field, the job's and the
audit row's parameters, the API) stays the exact ID. Expected texts are formatted here with datetime.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from tests.console.helpers import stream_url

T = 1_795_920_600_000  # the 12:30:00.000
MAX = str(2**64 - 1)
END = f"{T}-{MAX}"


def clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def visible(body: str) -> str:
    """The page's text as a reader sees it: tags, and so attribute values and hidden inputs, removed."""
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_replay_bounds_read_as_times(r: redis.Redis, operator_client: Client) -> None:
    for i in range(6):
        r.xadd("events", {"n": str(i)}, id=f"{T - 50_000 + 10_000 * i}-0")
    r.xadd("events", {"n": "late"}, id=f"{T + 1}-0")
    start = T - 30_000
    page = operator_client.post(stream_url("events") + "replay/count/", {"start": iso(start), "end": iso(T), "target": "copy"})
    body = page.content.decode()
    assert f'name="end" value="{END}"' in body  # the exact ID travels on
    text = visible(body)
    assert f"to the end of {clock(T)}" in text and f"from {clock(start)}" in text
    assert MAX not in text

    done = operator_client.post(stream_url("events") + "replay/", {"start": f"{start}-0", "end": END, "target": "copy"}, follow=True)
    job = Job.objects.get()
    assert job.parameters["end"] == END  # stored exactly
    text = visible(done.content.decode())  # the job page, with the flash
    assert text.count(f"to the end of {clock(T)}") >= 2 and MAX not in text

    audit = visible(operator_client.get("/audit/").content.decode())
    assert AuditEvent.objects.filter(action="replay", parameters__end=END).exists()
    assert f"to the end of {clock(T)}" in audit and MAX not in audit
