"""The lake and the reports mask: once, after a pipeline run, ``/reports/`` showed a masked
``dlq_error`` in clear, as the signature and as the example, because the lake export applied no masking.

- The exporter reads through the masker: no value a rule hides reaches the lake (entries, dead letters),
  in the serial exporter and in its worker processes; a hashed value is the console's hash.
- The reports page masks rows by today's rules: a row made before a rule existed shows masked once the
  rule is there, its "Entries" link filtering on the masked signature.
- End to end: export, Spark's failures job, the load, the page: the secret is nowhere.

The secrets and the expected hash are the test's own (the hash spelled out with hmac/hashlib).
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from pipeline import main
from pipeline.signatures import normalize_error
from streams_app.lake import export
from streams_app.lake import rollups as rollup_load
from streams_app.lake.models import ErrorSignatureRollup
from tests.console.conftest import logged_in, make_user
from tests.console.masking.test_masked_paths import expected_hash
from tests.pipeline.test_export import lake_rows

pytestmark = pytest.mark.django_db

ERROR = "ValueError: card 4000-1234-5678-9010 of ann.secret@example.com declined"
SECRETS = ("4000-1234-5678-9010", "ann.secret@example.com")
EMAIL = "bo.secret@example.com"
MASK = "••••"


@pytest.fixture
def rules(settings) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "*:dlq", "field": "dlq_error", "action": "mask"},
                {"stream": "orders", "field": "data.customer.email", "action": "hash"},  # the origin's rule
            ]
        )
    )


def dead_letters(r: redis.Redis, n: int = 3) -> None:
    for i in range(n):
        r.xadd(
            "orders:dlq",
            {
                "type": "order.created",
                "data": json.dumps({"order_id": i, "customer": {"email": EMAIL}}),
                "dlq_original_stream": "orders",
                "dlq_original_id": f"{i + 1}-0",
                "dlq_group": "billing",
                "dlq_error": ERROR,
                "dlq_retries": "5",
            },
        )


def lake_text(lake: Path) -> str:
    return json.dumps([lake_rows(lake, name) for name in ("entries", "dlq")], default=repr)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_lake_holds_masked_values(rules, r, lake_dir: Path, workers: int) -> None:
    dead_letters(r)
    stats = export.export_run(tables=False, workers=workers, parallel_min=0 if workers > 1 else 10**9)
    assert stats.failed == [] and stats.entries == 3
    text = lake_text(lake_dir)
    for secret in (*SECRETS, EMAIL):
        assert secret not in text
    dead = lake_rows(lake_dir, "dlq")
    assert [row["error"] for row in dead] == [MASK] * 3
    payloads = [json.loads(f["value"]) for row in lake_rows(lake_dir) for f in row["fields"] if f["name"] == b"data"]
    assert len(payloads) == 3 and {p["customer"]["email"] for p in payloads} == {expected_hash(EMAIL)}


@pytest.fixture
def viewer_client() -> Client:
    return logged_in(make_user("vera-viewer", groups=("viewer",)))


def test_the_reports_page_masks_rows_made_before_the_rule(rules, viewer_client: Client) -> None:
    ErrorSignatureRollup.objects.create(
        connection="default", stream=b"orders", stream_hash="a" * 64, stream_text="orders",
        dlq=b"orders:dlq", dlq_hash="b" * 64, dlq_text="orders:dlq", signature=normalize_error(ERROR),
        search="ValueError: card", count=3, first_seen=datetime(2026, 1, 5, tzinfo=UTC),
        last_seen=datetime(2026, 1, 5, tzinfo=UTC), example_error=ERROR, example_entry_id="1-0", rank=1,
    )  # fmt: skip
    page = viewer_client.get("/reports/").content.decode()
    for secret in SECRETS:
        assert secret not in html.unescape(page)
    assert "<code>••••</code>" in page
    hrefs = [html.unescape(h.split('"')[0]) for h in page.split('href="')[1:]]
    link = next(h for h in hrefs if h.startswith("/c/default/dlq/") and "signature=" in h)
    assert parse_qs(urlsplit(link).query)["signature"] == [MASK]


@pytest.mark.spark
def test_a_pipeline_run_reports_no_masked_value(rules, spark, r, lake_dir: Path, viewer_client: Client) -> None:
    dead_letters(r)
    assert not export.export_run(tables=False).failed
    main.run_all(spark, str(lake_dir), as_of=datetime.now(UTC), jobs=["failures"])
    rollup_load.rollups_load()
    row = ErrorSignatureRollup.objects.get()
    assert (row.signature, row.example_error, row.count) == (MASK, MASK, 3)
    page = html.unescape(viewer_client.get("/reports/").content.decode())
    for secret in (*SECRETS, EMAIL):
        assert secret not in page
