"""The exporter against the suite's real Redis: every entry lands in the lake exactly once.

Expected values come from the test's own XRANGE of the same streams and from arithmetic on the IDs and
fields the test wrote, never from the exporter's code.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from streams_app.lake import export
from streams_app.lake.models import ExportCheckpoint
from streams_app.metrics.models import (
    DlqSample,
    GroupMirror,
    GroupSample,
    StreamMirror,
    StreamSample,
    name_hash,
)

pytestmark = pytest.mark.django_db

DAY_MS = 86_400_000
BASE_MS = 1_767_225_600_000 - 3_000  # 3 s before 2026-01-01T00:00Z: the first entries straddle midnight
BINARY_KEY = b"bin\xff\x00key"


class Crash(Exception):
    """What a killed exporter looks like to the code after the failing step."""


def lake_rows(lake: Path, dataset: str = "entries") -> list[dict]:
    """Every row of a dataset, read with pyarrow alone (data columns only)."""
    path = lake / dataset
    if not path.exists():
        return []
    files = [str(p) for p in path.rglob("*.parquet") if not p.name.startswith(".")]
    return ds.dataset(files, format="parquet").to_table().to_pylist()


def redis_entries(r, key: bytes) -> list[tuple[str, list[bytes]]]:
    """The stream as the test reads it: (id, flat field list), in paged XRANGE calls."""
    out, start = [], "-"
    while True:
        page = r.xrange(key, min=start, max="+", count=100)
        if not page:
            return out
        out += [(eid.decode(), [x for pair in fields.items() for x in pair]) for eid, fields in page]
        start = "(" + page[-1][0].decode()


def add(r, key: bytes, n: int, *, start_ms: int, step_ms: int = 1000, binary: bool = False) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        fields: dict[bytes, bytes] = {b"type": f"t{i % 3}".encode(), b"data": json.dumps({"i": i}).encode()}
        if binary:
            fields[b"\x00raw\xfe"] = bytes([i % 256, 0, 255])
        pipe.xadd(key, fields, id=f"{start_ms + i * step_ms}-{i % 2}")
    pipe.execute()


def assert_exactly_once(r, lake: Path, keys: list[bytes]) -> list[dict]:
    rows = lake_rows(lake)
    seen = Counter((row["stream"], row["entry_id"]) for row in rows)
    assert max(seen.values()) == 1, [k for k, c in seen.items() if c > 1][:5]
    expected = {(key, eid) for key in keys for eid, _ in redis_entries(r, key)}
    assert set(seen) == expected
    return rows


def test_two_incremental_runs_export_every_entry_once(r, lake_dir: Path) -> None:
    keys = [b"orders", BINARY_KEY, b"small"]
    add(r, b"orders", 25, start_ms=BASE_MS)
    add(r, BINARY_KEY, 12, start_ms=BASE_MS, step_ms=700, binary=True)
    add(r, b"small", 1, start_ms=BASE_MS)

    first = export.export_run(chunk_rows=7, tables=False)
    assert first.entries == 38 and not first.failed
    assert_exactly_once(r, lake_dir, keys)

    add(r, b"orders", 10, start_ms=BASE_MS + DAY_MS)  # the next day
    add(r, BINARY_KEY, 3, start_ms=BASE_MS + DAY_MS, binary=True)
    second = export.export_run(chunk_rows=7, tables=False)
    assert second.entries == 13
    rows = assert_exactly_once(r, lake_dir, keys)

    third = export.export_run(chunk_rows=7, tables=False)
    assert third.entries == 0 and third.files == 0
    checkpoint = ExportCheckpoint.objects.get(connection="default", key_hash=name_hash(BINARY_KEY))
    assert bytes(checkpoint.key) == BINARY_KEY and checkpoint.exported == 15 and checkpoint.pending == []

    # Every column against the test's own reading of the same entries.
    by_id = {(row["stream"], row["entry_id"]): row for row in rows}
    for key in keys:
        for entry_id, flat in redis_entries(r, key):
            row = by_id[(key, entry_id)]
            ms, seq = (int(part) for part in entry_id.split("-"))
            assert [x for f in row["fields"] for x in (f["name"], f["value"])] == flat
            assert (row["ms"], row["seq"], row["conn"]) == (ms, seq, "default")
            assert row["ts"] == datetime.fromtimestamp(ms / 1000, UTC)
            assert row["date"] == datetime.fromtimestamp(ms / 1000, UTC).date()
            assert row["event_type"] == flat[flat.index(b"type") + 1].decode()
            assert row["payload_size"] == sum(len(x) for x in flat)
            assert row["stream_text"] == ("bin\\xff\\x00key" if key == BINARY_KEY else key.decode())


def test_files_never_span_two_days(r, lake_dir: Path) -> None:
    add(r, b"orders", 6, start_ms=BASE_MS)  # 3 entries before midnight, 3 after
    export.export_run(tables=False)
    days = sorted(p.parent.name for p in (lake_dir / "entries").rglob("part-*.parquet"))
    assert days == ["day=2025-12-31", "day=2026-01-01"]
    assert (lake_dir / "entries" / "connection=default" / f"stream_hex={b'orders'.hex()}").is_dir()


def test_payload_fields_carry_no_statistics_and_the_other_columns_keep_theirs(r, lake_dir: Path) -> None:
    """Parquet min/max of every payload name and value would be written for no reader; the columns a
    reader filters on (times, IDs, types) keep theirs, as Parquet's own metadata says."""
    add(r, b"orders", 5, start_ms=BASE_MS)
    assert not export.export_run(tables=False).failed
    files = list((lake_dir / "entries").rglob("*.parquet"))
    assert files
    for path in files:
        group = pq.ParquetFile(path).metadata.row_group(0)
        stats = {group.column(i).path_in_schema: group.column(i).is_stats_set for i in range(group.num_columns)}
        assert {name for name, kept in stats.items() if not kept} == {
            "fields.list.element.name", "fields.list.element.value"
        }
        rows = pq.read_table(path, columns=["ms"]).column("ms").to_pylist()
        ms = group.column(list(stats).index("ms")).statistics
        assert (ms.min, ms.max) == (min(rows), max(rows))


def test_dead_letters_are_kept_by_month_in_one_file_each(r, lake_dir: Path) -> None:
    def dead(ms: int) -> None:
        r.xadd("orders:dlq", {
            "type": "order.paid", "data": "{}", "dlq_original_stream": "orders", "dlq_original_id": "1-0",
            "dlq_group": "billing", "dlq_error": "ValueError: bad", "dlq_retries": "1", "dlq_failed_at": str(ms),
        }, id=f"{ms}-0")

    for ms in (BASE_MS, BASE_MS + 5_000, BASE_MS + 9 * DAY_MS):  # Dec 31, then Jan 1 and Jan 9
        dead(ms)
    export.export_run(tables=False)
    dead(BASE_MS + 20 * DAY_MS)  # a second run adds a file to January, which compaction merges
    export.export_run(tables=False)

    files = sorted(p.relative_to(lake_dir / "dlq") for p in (lake_dir / "dlq").rglob("*.parquet"))
    directory = Path("connection=default") / f"stream_hex={b'orders:dlq'.hex()}"
    assert [f.parent for f in files] == [directory / "day=2025-12-01", directory / "day=2026-01-01"]
    assert sorted(row["ms"] for row in lake_rows(lake_dir, "dlq")) == [
        BASE_MS, BASE_MS + 5_000, BASE_MS + 9 * DAY_MS, BASE_MS + 20 * DAY_MS
    ]
    # the DLQ is a stream too: its raw entries stay in `entries`, by day
    days = sorted(p.parent.name for p in (lake_dir / "entries").rglob("part-*.parquet"))
    assert days == ["day=2025-12-31", "day=2026-01-01", "day=2026-01-09", "day=2026-01-20"]


@pytest.mark.parametrize("grows", [False, True], ids=["same-range", "stream-grew"])
def test_crash_between_write_and_checkpoint_leaves_no_duplicate(r, lake_dir: Path, grows: bool) -> None:
    add(r, b"orders", 20, start_ms=BASE_MS)
    export.export_run(chunk_rows=8, tables=False)
    add(r, b"orders", 5, start_ms=BASE_MS + 100_000)  # a partial chunk: the crash hits its files

    def crash(paths: list[str]) -> None:
        assert all((lake_dir / p).exists() for p in paths)  # written, but not yet checkpointed
        raise Crash

    with pytest.raises(Crash):
        export.export_run(chunk_rows=8, tables=False, on_written=crash)
    checkpoint = ExportCheckpoint.objects.get(key_hash=name_hash(b"orders"))
    assert checkpoint.pending and checkpoint.exported == 20

    if grows:  # the redo reads a longer range, so its file names differ from the crashed run's
        add(r, b"orders", 4, start_ms=BASE_MS + 200_000)
    again = export.export_run(chunk_rows=8, tables=False)
    assert again.entries == (9 if grows else 5)
    assert_exactly_once(r, lake_dir, [b"orders"])
    assert not list(lake_dir.rglob(".tmp-*"))


def test_metrics_and_dead_letters_get_typed_datasets(r, lake_dir: Path) -> None:
    r.xadd("eventbus:metrics", {
        "event": "processed", "stream": "orders", "group": "billing", "type": "order.created",
        "count": "4", "duration_ms": "10.500", "max_ms": "4.250", "consumer": "w1", "ts": "1767225600123",
    }, id=f"{BASE_MS}-0")
    r.xadd("eventbus:metrics", {
        "event": "failed", "stream": "orders", "group": "billing", "type": "order.created", "count": "1",
        "duration_ms": "oops", "max_ms": "1", "consumer": "w1", "ts": "1", "entry_id": "5-0", "event_id": "e5",
        "error": "ValueError: bad 7",
    }, id=f"{BASE_MS}-1")
    r.xadd("orders:dlq", {
        "type": "order.created", "data": "{}", "dlq_original_stream": "orders", "dlq_original_id": "5-0",
        "dlq_group": "billing", "dlq_error": "ValueError: bad 7", "dlq_traceback": "...", "dlq_retries": "5",
        "dlq_failed_at": str(BASE_MS + 5),
    }, id=f"{BASE_MS + 10}-0")
    omni = {"topic": "t", "original_stream": "omni-stream:t", "original_id": "9-0", "failed_message": {"a": 1},
            "error": "KeyError: 'sku'", "retry_count": 3, "failed_at": (BASE_MS + 20) / 1000}
    r.xadd("omni-dlq:group:t:agent", {"data": json.dumps(omni)}, id=f"{BASE_MS + 30}-0")

    stats = export.export_run(tables=False)
    assert (stats.metrics, stats.dead_letters) == (2, 2)

    metrics = sorted(lake_rows(lake_dir, "metrics"), key=lambda row: row["entry_id"])
    assert [(m["event"], m["count"], m["duration_ms"], m["max_ms"], m["reported_ms"]) for m in metrics] == [
        ("processed", 4, 10.5, 4.25, 1767225600123),
        ("failed", 1, None, 1.0, 1),
    ]
    assert metrics[1]["error"] == "ValueError: bad 7" and metrics[1]["ref_entry_id"] == "5-0"

    dead = {row["dlq"]: row for row in lake_rows(lake_dir, "dlq")}
    ours, theirs = dead[b"orders:dlq"], dead[b"omni-dlq:group:t:agent"]
    assert (ours["convention"], ours["stream"], ours["group"], ours["retries"]) == ("eventbus", b"orders", "billing", 5)
    assert ours["failed_ms"] == BASE_MS + 5 and ours["error"] == "ValueError: bad 7"
    assert (theirs["convention"], theirs["stream"], theirs["retries"]) == ("omnidaemon", b"omni-stream:t", 3)
    assert theirs["failed_ms"] == BASE_MS + 20 and theirs["error"] == "KeyError: 'sku'"
    # the DLQs and the metrics stream are streams too: their raw entries are in `entries` as well
    assert len(lake_rows(lake_dir)) == 4


def test_snapshot_tables_are_exported_once_settled(lake_dir: Path) -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    stream = StreamMirror.objects.create(
        connection="default", key=b"orders\xff", key_hash=name_hash(b"orders\xff"), key_text="orders\\xff",
        first_seen=now, last_seen=now, synced_at=now,
    )
    group = GroupMirror.objects.create(
        stream=stream, name=b"billing", name_hash=name_hash(b"billing"), name_text="billing",
        first_seen=now, last_seen=now,
    )
    at = [now - timedelta(minutes=m) for m in (30, 20, 10, 0)]  # the last one is not settled yet
    for i, moment in enumerate(at):
        StreamSample.objects.create(stream=stream, at=moment, length=100 + i, added=i, rate_per_s=0.5 * i)
        GroupSample.objects.create(group=group, at=moment, lag=i * 10, pending=i, oldest_pending_idle_ms=None)
        DlqSample.objects.create(stream=stream, at=moment, depth=i)

    first = export.export_run(conns=[], now=now)
    assert first.samples == 9
    second = export.export_run(conns=[], now=now + timedelta(minutes=5))
    assert second.samples == 3  # only the row that settled since
    groups = sorted(lake_rows(lake_dir, "snapshots/group_samples"), key=lambda row: row["at"])
    assert [(g["lag"], g["pending"], g["group"], g["stream"]) for g in groups] == [
        (i * 10, i, b"billing", b"orders\xff") for i in range(4)
    ]
    assert [g["at"] for g in groups] == at
    assert len(lake_rows(lake_dir, "snapshots/stream_samples")) == 4
    assert len(lake_rows(lake_dir, "snapshots/dlq_samples")) == 4


def test_export_history_command_match_and_since(r, lake_dir: Path, capsys) -> None:
    add(r, b"orders", 10, start_ms=BASE_MS)
    add(r, b"other", 4, start_ms=BASE_MS)
    call_command("export_history", match="ord*", since=f"{BASE_MS + 5000}-0")
    assert "5 entries" in capsys.readouterr().out
    rows = lake_rows(lake_dir)
    assert {row["stream"] for row in rows} == {b"orders"}
    assert sorted(row["ms"] for row in rows) == [BASE_MS + i * 1000 for i in range(5, 10)]


@pytest.mark.django_db(transaction=True)  # the worker processes write checkpoints to the same database
def test_worker_processes_export_every_entry_once(r, lake_dir: Path) -> None:
    keys = [f"s{i}".encode() for i in range(5)] + [BINARY_KEY]
    for n, key in enumerate(keys):
        add(r, key, 20 + n, start_ms=BASE_MS, binary=key == BINARY_KEY)
    stats = export.export_run(workers=2, parallel_min=0, chunk_rows=9, tables=False)
    assert (stats.streams, stats.entries, stats.failed) == (6, sum(20 + n for n in range(6)), [])
    assert_exactly_once(r, lake_dir, keys)
    assert ExportCheckpoint.objects.filter(kind="stream").count() == 6
    add(r, b"s0", 3, start_ms=BASE_MS + DAY_MS)
    assert export.export_run(workers=2, parallel_min=0, tables=False).entries == 3
    assert_exactly_once(r, lake_dir, keys)


@pytest.mark.django_db(transaction=True)
def test_a_parallel_export_spawns_one_worker_fewer_and_exports_in_the_calling_process(r, lake_dir: Path) -> None:
    """Spawning a worker costs a fresh interpreter setting Django up, so the calling process exports streams
    too: two processes exporting are one spawned worker and this one. Seen from the progress callback
    (called in this process): at most one child at any time, and counts part-way through a stream, which
    only a chunk exported here reports (a worker reports its stream when done, 30 entries each)."""
    import multiprocessing

    keys = [f"p{i}".encode() for i in range(6)]
    for key in keys:
        add(r, key, 30, start_ms=BASE_MS)
    children: list[int] = []
    seen: list[int] = []

    def progress(stats) -> None:
        children.append(len(multiprocessing.active_children()))
        seen.append(stats.entries)

    stats = export.export_run(workers=2, parallel_min=0, chunk_rows=9, tables=False, on_progress=progress)
    assert (stats.streams, stats.entries, stats.failed) == (6, 180, [])
    assert max(children) == 1
    assert any(n % 30 for n in seen)
    assert_exactly_once(r, lake_dir, keys)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_parallel_export_cancelled_in_a_chunk_of_its_own_leaves_no_worker_and_loses_nothing(r, lake_dir: Path) -> None:
    """A cancelled job's progress callback raises: here in the calling process's own chunk (the second
    call, before any worker stream can have ended). The error comes out, no worker is left running, and
    the next run exports every entry exactly once."""
    import multiprocessing

    keys = [f"c{i}".encode() for i in range(6)]
    for key in keys:
        add(r, key, 30, start_ms=BASE_MS)
    calls: list[int] = []

    def cancel(stats) -> None:
        calls.append(stats.entries)
        if len(calls) == 2:
            raise Crash("cancelled")

    with pytest.raises(Crash):
        export.export_run(workers=2, parallel_min=0, chunk_rows=9, tables=False, on_progress=cancel)
    assert multiprocessing.active_children() == []
    stats = export.export_run(workers=2, parallel_min=0, chunk_rows=9, tables=False)
    assert stats.failed == []
    assert_exactly_once(r, lake_dir, keys)


def test_a_stream_s_own_metrics_stream_is_typed_and_a_look_alike_is_not(r, lake_dir: Path) -> None:
    fields = {"event": "processed", "stream": "orders", "group": "billing", "type": "order.created",
              "count": "3", "duration_ms": "6.000", "max_ms": "2.500", "consumer": "w1", "ts": str(BASE_MS)}
    r.xadd("{orders}:metrics", fields, id=f"{BASE_MS}-0")  # the bus's per-stream name (eventbus.keys)
    r.xadd("audit:metrics", fields, id=f"{BASE_MS}-0")  # a user's stream that merely ends in :metrics

    stats = export.export_run(tables=False)

    assert stats.metrics == 1
    [metric] = lake_rows(lake_dir, "metrics")
    assert (metric["event"], metric["count"], metric["duration_ms"]) == ("processed", 3, 6.0)
    assert len(lake_rows(lake_dir)) == 2  # both are still exported as plain entries


def test_the_collector_is_paused_while_a_stream_is_read_and_back_after(r, lake_dir: Path) -> None:
    """Each reply is two lists an entry, which the cyclic collector would walk again and again: it is
    off while a stream is exported (seen from the progress callback inside a chunk), and on after, also
    when the callback raises mid-stream (as a cancelled job's does)."""
    import gc

    add(r, b"orders", 30, start_ms=BASE_MS)
    seen: list[bool] = []
    stats = export.export_run(chunk_rows=10, tables=False, on_progress=lambda _: seen.append(gc.isenabled()))
    assert stats.entries == 30
    assert seen[:3] == [False, False, False] and seen[-1] is True  # three chunks, then the run's end
    assert gc.isenabled()

    class Cancelled(Exception):
        pass

    def cancel(_) -> None:
        raise Cancelled

    add(r, b"orders", 5, start_ms=BASE_MS + DAY_MS)
    with pytest.raises(Cancelled):
        export.export_run(tables=False, on_progress=cancel)
    assert gc.isenabled()
