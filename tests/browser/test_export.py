"""The stream page's "Export" form in a real browser: the download is the range, read back and compared
with XRANGE; the CSV comes through Playwright's download, through the ASGI server (async streaming)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = pytest.mark.browser


def test_export_form_downloads_the_range(page, viewer, asgi_server, r: redis.Redis) -> None:
    key = b"exp:\xffbrowser"
    ids = [
        r.xadd(
            key, {"type": "order.created", "data": json.dumps({"n": i}), "raw": b"\xfe" + bytes([i])}
        ).decode()
        for i in range(30)
    ]
    login_through_form(page, viewer, asgi_server)
    page.goto(f"/c/default/streams/{quote(key, safe='')}/")
    page.fill("#export-form input[name=from]", ids[3])
    page.fill("#export-form input[name=to]", ids[20])
    page.select_option("#export-form select[name=format]", "csv")
    with page.expect_download() as info:
        page.click("#export-download")
    download = info.value
    assert download.suggested_filename == "exp_xffbrowser.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_bytes().decode("utf-8"))))
    expected = r.xrange(key, ids[3], ids[20])
    assert [row["id"] for row in rows] == [i.decode() for i, _ in expected]
    assert [row["fields.data"] for row in rows] == [f[b"data"].decode() for _, f in expected]
    assert [row["fields.raw"] for row in rows] == [
        f[b"raw"].decode("utf-8", "backslashreplace") for _, f in expected
    ]
