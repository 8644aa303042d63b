"""Exports of a range against real Redis: every format read back with its own reader
(json, csv, pyarrow) and compared with XRANGE read here, bounds, pages, the job path, roles, audit rows.

The stream has a binary key, names and values that are not UTF-8, a repeated name and JSON payloads.
Expected values come from Redis (a raw XRANGE without redis-py's dict parsing, which would drop a
repeated name) and plain Python (``bytes.decode("utf-8", "backslashreplace")`` for the text form).
"""

from __future__ import annotations

import base64
import csv
import io
import json
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
import redis

from streams_app.audit.models import AuditEvent
from streams_app.exports import files, reader
from streams_app.jobs import runner
from tests.console.helpers import seg

KEY = b"exp:\xffbin"
N = 2500  # three pages of 1000


def _text(raw: bytes) -> str:
    """The console's text form: UTF-8, other bytes as ``\\xNN``, NUL as ``\\x00`` (no bidi controls here)."""
    return raw.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


def _lossy(pairs: list[tuple[bytes, bytes]]) -> bool:
    def utf8(b: bytes) -> bool:
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    return len({n for n, _ in pairs}) != len(pairs) or not all(utf8(n) and utf8(v) for n, v in pairs)


def _fill(r: redis.Redis, n: int = N) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        fields: list[bytes] = [
            b"type",
            b"order.created",
            b"data",
            json.dumps({"n": i, "s": "needle" if i % 7 == 0 else "hay"}).encode(),
        ]
        if i % 5 == 0:
            fields += [b"blob", bytes([0xFF, 0xFE, i % 256])]
        if i % 11 == 0:
            fields += [b"\xfaname", b"v"]
        if i % 13 == 0:
            fields += [b"type", b"dup"]  # a repeated name
        pipe.execute_command("XADD", KEY, "*", *fields)
    pipe.execute()


def _xrange(r: redis.Redis, start: str = "-", end: str = "+") -> list[tuple[str, list[tuple[bytes, bytes]]]]:
    """The range from Redis itself, in pages of 500, raw (no dicts)."""
    raw = redis.Redis(connection_pool=r.connection_pool)
    raw.set_response_callback("XRANGE", lambda reply, **_: reply)
    out = []
    while True:
        page = raw.execute_command("XRANGE", KEY, start, end, "COUNT", 500)
        out += [(i.decode(), [(f[k], f[k + 1]) for k in range(0, len(f), 2)]) for i, f in page]
        if len(page) < 500:
            return out
        start = "(" + page[-1][0].decode()


def _iso(entry_id: str) -> str:
    ms = int(entry_id.split("-")[0])
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _url(rest: str = "") -> str:
    return f"/api/v1/c/default/streams/{seg(KEY)}/export{rest}"


def _body(response) -> bytes:
    assert response.status_code == 200, response.content[:300]
    return b"".join(response.streaming_content)


@pytest.fixture
def exports_dir(settings, tmp_path):
    settings.BUSCONSOLE_EXPORT_DIR = str(tmp_path / "exports")
    return tmp_path / "exports"


# ------------------------------------------------------------------------------------- round trips


def _ndjson_pairs(line: dict) -> list[tuple[bytes, bytes]]:
    if "raw" in line:
        return [(base64.b64decode(n), base64.b64decode(v)) for n, v in line["raw"]]
    return [(n.encode(), v.encode()) for n, v in line["fields"].items()]


def test_ndjson_round_trips_every_byte(r, viewer_client) -> None:
    _fill(r)
    expected = _xrange(r)
    lines = [json.loads(x) for x in _body(viewer_client.get(_url())).splitlines()]
    assert [(x["id"], _ndjson_pairs(x)) for x in lines] == expected
    assert [x["time"] for x in lines] == [_iso(i) for i, _ in expected]
    for line, (_, pairs) in zip(lines, expected, strict=True):
        assert line["decoded"]["data"] == json.loads(dict(pairs)[b"data"])
        assert ("raw" in line) == _lossy(pairs)
        assert line["fields"].get("blob", "") == _text(dict(pairs).get(b"blob", b""))


def test_csv_round_trips_as_text(r, viewer_client) -> None:
    _fill(r)
    expected = _xrange(r)
    rows = list(csv.reader(io.StringIO(_body(viewer_client.get(_url("?format=csv"))).decode())))
    header, rows = rows[0], rows[1:]
    # columns: those of the first page (1000 entries), in order of first appearance
    first_page_names: list[str] = []
    for _, pairs in expected[:1000]:
        for name, _ in pairs:
            if _text(name) not in first_page_names:
                first_page_names.append(_text(name))
    assert header == ["id", "time", *(f"fields.{name}" for name in first_page_names), "other_fields"]
    assert len(rows) == len(expected)
    for row, (entry_id, pairs) in zip(rows, expected, strict=True):
        assert row[:2] == [entry_id, _iso(entry_id)]
        got = [(header[i].removeprefix("fields."), cell) for i, cell in enumerate(row[2:-1], start=2) if cell != ""]
        got += [tuple(p) for p in json.loads(row[-1] or "[]")]
        assert sorted(got) == sorted((_text(n), _text(v)) for n, v in pairs if v != b"")


def test_parquet_round_trips_with_pyarrow(r, viewer_client) -> None:
    _fill(r)
    expected = _xrange(r)
    parquet = pq.ParquetFile(io.BytesIO(_body(viewer_client.get(_url("?format=parquet")))))
    assert parquet.num_row_groups == 3  # one per page read
    rows = parquet.read().to_pylist()
    assert [row["id"] for row in rows] == [i for i, _ in expected]
    for row, (entry_id, pairs) in zip(rows, expected, strict=True):
        assert int(row["time"].timestamp() * 1000) == int(entry_id.split("-")[0])
        assert [(f["name"], f["value"]) for f in row["fields"]] == [(_text(n), _text(v)) for n, v in pairs]
        raw = row["fields_raw"]
        restored = (
            [(f["name"], f["value"]) for f in raw]
            if raw is not None
            else [(f["name"].encode(), f["value"].encode()) for f in row["fields"]]
        )
        assert restored == pairs


def test_bounds_are_inclusive_ids_and_times(r, viewer_client) -> None:
    ids = [r.xadd(KEY, {"n": str(i)}, id=f"{1000 + i // 2}-{i % 2}").decode() for i in range(10)]
    got = [
        json.loads(x)["id"]
        for x in _body(viewer_client.get(_url(f"?from={ids[2]}&to={ids[5]}"))).splitlines()
    ]
    assert got == ids[2:6]
    # a bare millisecond covers its whole millisecond at both ends
    got = [json.loads(x)["id"] for x in _body(viewer_client.get(_url("?from=1001&to=1002"))).splitlines()]
    assert got == [i for i, _ in _xrange(r, "1001", "1002")] == ids[2:6]
    assert viewer_client.get(_url(f"?from={ids[5]}&to={ids[2]}")).status_code == 400


def test_bad_input_is_a_400_never_a_500(r, viewer_client) -> None:
    _fill(r, 3)
    assert viewer_client.get(_url("?format=xml")).status_code == 400
    assert viewer_client.get(_url("?from=yesterday")).status_code == 400
    assert viewer_client.get(f"/api/v1/c/default/streams/{seg(b'nope')}/export").status_code == 404


# ------------------------------------------------------------------------------------- bounded


def _xrange_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_xrange", {}).get("calls", 0))


def test_the_generator_reads_one_page_per_chunk(r) -> None:
    _fill(r)
    first, last = reader.range_bounds("default", KEY, "-", "+")
    chunks = reader.export_bytes(
        "default", KEY, start=first, end=last, fmt="ndjson", matches=None, tally=reader.Tally(), mask=None
    )
    before = _xrange_calls(r)
    seen = []
    for chunk in chunks:
        seen.append((chunk.count(b"\n"), _xrange_calls(r) - before))
    # each chunk is one page, and only that page had been read when it came out
    assert seen == [(1000, 1), (1000, 2), (500, 3)]


# ------------------------------------------------------------------------------------- the job


@pytest.mark.parametrize("fmt", ["ndjson", "csv", "parquet"])
def test_the_job_writes_what_the_download_streams_and_survives_a_crash(
    r, operator, operator_client, exports_dir, monkeypatch, fmt
) -> None:
    _fill(r)
    streamed = _body(operator_client.get(_url(f"?format={fmt}")))
    monkeypatch.setattr(files, "PART_PAGES", 1)  # a part per page: three parts
    calls = {"n": 0}
    real = files.encoded_pages

    def crash_on_third_part(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("worker killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "encoded_pages", crash_on_third_part)
    response = operator_client.post(_url(), {"format": fmt}, content_type="application/json")
    assert response.status_code == 202, response.content
    job_id = response.json()["job"]
    assert runner.job_run(job_id).state == "failed"
    workdir = exports_dir / f"job-{job_id}"
    # two parts saved, and the killed third one's .tmp
    assert sorted(p.name for p in workdir.iterdir()) == [f"part-00000{i}.{fmt}" for i in (0, 1)] + [
        f"part-000002.{fmt}.tmp"
    ]
    (workdir / f"part-000002.{fmt}").write_bytes(b"half a part from the killed run")
    runner.job_resume(job_id=job_id)
    job = runner.job_run(job_id)
    assert job.state == "done" and job.done == N
    path = exports_dir / job.progress["file"]
    if fmt == "parquet":
        assert pq.read_table(path).to_pylist() == pq.read_table(io.BytesIO(streamed)).to_pylist()
    else:
        assert path.read_bytes() == streamed
    assert not workdir.exists()
    written = path.read_bytes()
    assert runner.job_run(job_id).state == "done"  # a redelivered task changes nothing
    assert path.read_bytes() == written
    download = operator_client.get(_url(f"?job={job_id}"))
    assert _body(download) == path.read_bytes()
    page_download = operator_client.get(f"/jobs/{job_id}/download/")
    assert b"".join(page_download.streaming_content) == path.read_bytes()


def test_the_job_runs_with_the_collector_paused_and_puts_it_back(
    r, operator_client, exports_dir, monkeypatch
) -> None:
    """A part is thousands of entries alive at once: the collector is off while the job encodes them,
    and on again after the job, also after a job that failed mid-way."""
    import gc

    _fill(r)
    monkeypatch.setattr(files, "PART_PAGES", 1)
    enabled: list[bool] = []
    real = files.encoded_pages

    def watched(*args, **kwargs):
        enabled.append(gc.isenabled())
        if len(enabled) == 2 and watched.crash:
            raise RuntimeError("worker killed")
        return real(*args, **kwargs)

    watched.crash = True  # type: ignore[attr-defined]  # a flag on the stub, read when it is called
    monkeypatch.setattr(files, "encoded_pages", watched)
    job_id = operator_client.post(_url(), {"format": "csv"}, content_type="application/json").json()["job"]
    assert runner.job_run(job_id).state == "failed"
    assert enabled == [False, False] and gc.isenabled()
    watched.crash = False  # type: ignore[attr-defined]  # a flag on the stub, read when it is called
    runner.job_resume(job_id=job_id)
    assert runner.job_run(job_id).state == "done"
    assert enabled[2:] == [False, False] and gc.isenabled()  # the resumed run: its second and third parts


def test_a_big_range_is_refused_for_download_and_exported_by_a_job(
    r, viewer, viewer_client, exports_dir, settings
) -> None:
    _fill(r, 150)
    settings.BUSCONSOLE_EXPORT_STREAM_MAX = 100
    refused = viewer_client.get(_url())
    assert refused.status_code == 400 and "background" in refused.json()["error"]["message"]
    job_id = viewer_client.post(_url(), {}, content_type="application/json").json()["job"]
    assert runner.job_run(job_id).done == 150
    lines = (exports_dir / f"export-{job_id}.ndjson").read_bytes().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [i for i, _ in _xrange(r)]


def test_another_users_file_is_not_theirs(r, viewer_client, operator_client, exports_dir) -> None:
    _fill(r, 5)
    job_id = operator_client.post(_url(), {}, content_type="application/json").json()["job"]
    runner.job_run(job_id)
    assert viewer_client.get(_url(f"?job={job_id}")).status_code == 403
    assert operator_client.get(_url(f"?job={job_id}")).status_code == 200


def test_expired_files_are_deleted(r, operator_client, exports_dir, settings) -> None:
    _fill(r, 5)
    job_id = operator_client.post(_url(), {}, content_type="application/json").json()["job"]
    runner.job_run(job_id)
    future = datetime.now(UTC).timestamp() + settings.BUSCONSOLE_EXPORT_RETENTION_H * 3600 + 60
    assert files.exports_expire(now=future) == 1
    gone = operator_client.get(_url(f"?job={job_id}"))
    assert gone.status_code == 409 and "expired" in gone.json()["error"]["message"]


# ------------------------------------------------------------------------------------- roles, audit


def test_export_role_none_switches_it_off_for_everyone(r, admin_client_, settings) -> None:
    _fill(r, 3)
    settings.BUSCONSOLE_EXPORT_ROLE = "none"
    assert admin_client_.get(_url()).status_code == 403
    assert admin_client_.post(_url(), {}, content_type="application/json").status_code == 403
    assert admin_client_.get(f"/c/default/streams/{seg(KEY)}/export/").status_code == 403
    assert sorted(AuditEvent.objects.values_list("action", "outcome")) == [
        ("export", "denied"),
        ("export", "denied"),
        ("export.job", "denied"),
    ]


def test_export_role_operator_refuses_viewers(r, viewer_client, operator_client, settings) -> None:
    _fill(r, 3)
    settings.BUSCONSOLE_EXPORT_ROLE = "operator"
    assert viewer_client.get(_url()).status_code == 403
    assert len(_body(operator_client.get(_url())).splitlines()) == 3


def test_every_export_writes_one_audit_row_with_its_count(r, viewer, viewer_client) -> None:
    _fill(r, 30)
    ids = [i for i, _ in _xrange(r)]
    _body(viewer_client.get(_url(f"?format=csv&from={ids[3]}&to={ids[12]}")))
    row = AuditEvent.objects.get()
    assert (row.action, row.outcome, row.who, row.affected, row.target_stream) == (
        "export",
        "ok",
        viewer,
        10,
        KEY,
    )
    params = row.parameters
    assert (params["format"], params["start_id"], params["end_id"], params["q"]) == (
        "csv",
        ids[3],
        ids[12],
        "",
    )


def test_the_page_form_downloads_and_starts_jobs(r, viewer_client, exports_dir) -> None:
    _fill(r, 4)
    page = viewer_client.get(f"/c/default/streams/{seg(KEY)}/")
    assert b'id="export-form"' in page.content
    download = viewer_client.post(
        f"/c/default/streams/{seg(KEY)}/export/", {"from": "-", "to": "+", "format": "ndjson"}
    )
    assert len(b"".join(download.streaming_content).splitlines()) == 4
    assert download["Content-Disposition"] == 'attachment; filename="exp_xffbin.ndjson"'
    started = viewer_client.post(f"/c/default/streams/{seg(KEY)}/export/job/", {"format": "csv"})
    assert started.status_code == 302 and started["Location"].startswith("/jobs/")


def test_q_keeps_what_the_search_matches(r, viewer_client) -> None:
    """``q`` goes to the search language (plain text: any field contains it), compared with Python."""
    _fill(r, 60)
    expected = [i for i, pairs in _xrange(r) if any(b"needle" in v for _, v in pairs)]
    got = [json.loads(x)["id"] for x in _body(viewer_client.get(_url("?q=needle"))).splitlines()]
    assert got == expected and 0 < len(got) < 60
    row = AuditEvent.objects.get()
    assert (row.affected, row.parameters["q"], row.parameters["scanned"]) == (len(expected), "needle", 60)
