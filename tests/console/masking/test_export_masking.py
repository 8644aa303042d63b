"""Masking on the export path: a masked value is in no exported file, neither
a streamed download (every format) nor a background job's file, for any role; and an export filtered by
a search for the secret writes nothing, since the search sees the entry as the user does.

The secret and its masked form are the test's own constants; Redis holds the unmasked entries.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import redis
from django.test import Client

from streams_app.jobs import runner
from tests.console.helpers import seg
from tests.console.masking.test_masked_paths import (  # noqa: F401
    CARD,
    MASK,
    SECRET,
    assert_masked,
    payload,
    rules,
)

URL = f"/api/v1/c/default/streams/{seg(b'orders')}/export"


def body(response) -> bytes:
    assert response.status_code == 200, response.content[:300]
    return b"".join(response.streaming_content)


@pytest.mark.parametrize("fmt", ["ndjson", "csv"])
def test_a_streamed_export_writes_masked_values(rules, admin_client_: Client, r: redis.Redis, fmt: str) -> None:  # noqa: F811
    for _ in range(3):
        r.xadd("orders", payload())
    exported = body(admin_client_.get(f"{URL}?format={fmt}"))  # even an admin's export is masked
    assert_masked(exported)
    assert exported.count(CARD.encode()) == 0 and SECRET.encode() not in exported


def test_a_parquet_export_writes_masked_values(rules, viewer_client: Client, r: redis.Redis, tmp_path) -> None:  # noqa: F811
    r.xadd("orders", payload())
    path = tmp_path / "x.parquet"
    path.write_bytes(body(viewer_client.get(f"{URL}?format=parquet")))
    cells = json.dumps(pq.read_table(path).to_pylist(), default=str)
    assert SECRET not in cells and CARD not in cells
    assert MASK in cells or "\\u2022" in cells


def test_a_background_export_writes_masked_values(rules, operator_client: Client, r: redis.Redis, settings, tmp_path) -> None:  # noqa: F811
    settings.BUSCONSOLE_EXPORT_DIR = str(tmp_path)
    for _ in range(5):
        r.xadd("orders", payload())
    job_id = operator_client.post(URL, {"format": "ndjson"}, content_type="application/json").json()["job"]
    job = runner.job_run(job_id)
    assert job.state == "done" and job.done == 5
    assert_masked((tmp_path / job.progress["file"]).read_bytes())


def test_searching_for_a_masked_value_exports_nothing(rules, viewer_client: Client, r: redis.Redis) -> None:  # noqa: F811
    r.xadd("orders", payload())
    r.xadd("orders", {"data": json.dumps({"customer": {"name": "bob-the-builder"}}), "card": "0"})
    # the plain-text search finds a value no rule masks, but not a masked one
    found = body(viewer_client.get(f"{URL}?format=ndjson&q=bob-the-builder")).splitlines()
    assert len(found) == 1
    assert body(viewer_client.get(f"{URL}?format=ndjson&q={SECRET}")).strip() == b""
    assert body(viewer_client.get(f"{URL}?format=ndjson&q={CARD}")).strip() == b""
