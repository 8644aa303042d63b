"""A full mirror pass done in parts, a few keys per tick (the first sync of a big server): nothing is marked
deleted while the pass has not seen every key, the page and the API say the mirror is partial, and once the
pass completes the mirror holds exactly the keys Redis's own SCAN lists, the keys deleted meanwhile marked
deleted once. Expected sets come from redis-py's SCAN of the test's Redis.
"""

from __future__ import annotations

from datetime import timedelta

import redis
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from streams_app.metrics import mirror, mirror_schedule, snapshots
from streams_app.metrics.mirror_pass import mirror_pass_part
from streams_app.metrics.models import MirrorState, StreamMirror, name_hash
from tests.console.helpers import CONN

N, K = 60, 8


def _fill(r: redis.Redis) -> None:
    for i in range(N):
        r.xadd(f"job:{i}", {"n": str(i)})
        if i % 4 == 0:
            r.xgroup_create(f"job:{i}", "g", id="0")
            r.xreadgroup("g", "c", {f"job:{i}": ">"}, count=1)
    r.set("not-a-stream", "x")


def _scan(r: redis.Redis) -> set[str]:
    return {name_hash(k) for k in r.scan_iter(count=100, _type="stream")}


def _live_rows() -> set[str]:
    return set(StreamMirror.objects.filter(connection=CONN, deleted_at__isnull=True).values_list("key_hash", flat=True))


def _deleted_rows() -> dict[str, object]:
    return dict(StreamMirror.objects.filter(connection=CONN, deleted_at__isnull=False).values_list("key_hash", "deleted_at"))


def test_a_pass_in_parts_marks_nothing_deleted_until_it_has_seen_every_key(
    r: redis.Redis, db, settings, viewer_client: Client
) -> None:
    settings.BUSCONSOLE_MIRROR_PASS_KEYS = K
    _fill(r)
    snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=timezone.now()))  # rows, but no mirror pass yet
    assert len(_live_rows()) == N
    gone_before = [f"job:{i}" for i in range(0, N, 9)]
    r.delete(*gone_before)

    first = mirror_schedule.mirror_sync_guarded()[CONN]  # the beat body: a first part
    assert not isinstance(first, str) and not first.pass_complete and first.streams_deleted == 0
    assert first.streams_written < N - len(gone_before)
    assert not _deleted_rows() and len(_live_rows()) == N  # nothing shown as deleted while partial
    assert mirror.mirror_filling(conn=CONN) == (first.streams_written, r.dbsize())
    page = viewer_client.get(reverse("streams", args=[CONN]))
    assert page.status_code == 200
    assert f"Mirror partial: synced {first.streams_written} streams of about {r.dbsize()} keys" in page.text
    api = viewer_client.get(reverse("api-streams", args=[CONN]), {"sort": "name"}).json()
    assert api["filling"] == {"synced": first.streams_written, "about": r.dbsize()}

    started = MirrorState.objects.get(connection=CONN).pass_started_at
    seen = sorted(bytes(k).decode() for k in StreamMirror.objects.filter(last_seen__gte=started).values_list("key", flat=True))
    unseen = [f"job:{i}" for i in range(N) if f"job:{i}" not in gone_before and f"job:{i}" not in seen]
    gone_during = [seen[0], *unseen[:3]]  # one the pass has written already: its end checks it again
    r.delete(*gone_during)
    r.xadd("late:1", {"x": "1"})
    results = [first]
    while not results[-1].pass_complete:
        assert len(results) < 3 * N // K
        result = mirror_schedule.mirror_sync_guarded()[CONN]
        assert not isinstance(result, str)
        if not result.pass_complete:
            assert not _deleted_rows()
        results.append(result)
    live = N - len(gone_before) - len(gone_during)
    assert len(results) >= live // (2 * K) and max(res.streams_written for res in results) < live // 2  # split

    # Every key SCAN lists, and no other, is a live row; but for the one created during the pass, which
    # SCAN itself may or may not have returned (the next pass has it, below).
    late = {name_hash(b"late:1")}
    assert _live_rows() - late == _scan(r) - late
    gone = {name_hash(k.encode()) for k in gone_before + gone_during}
    deleted = _deleted_rows()
    assert set(deleted) == gone and sum(res.streams_deleted for res in results) == len(gone)
    assert mirror.mirror_filling(conn=CONN) is None
    assert "Mirror partial" not in viewer_client.get(reverse("streams", args=[CONN])).text
    state = MirrorState.objects.get(connection=CONN)
    assert state.full_synced_at is not None and state.pass_cursor is None

    # The next pass (due again) marks none of them a second time.
    later = timezone.now() + timedelta(seconds=settings.BUSCONSOLE_MIRROR_FULL_EVERY_S + 1)
    again = [mirror_schedule.mirror_sync_guarded(now=later)[CONN]]
    while not again[-1].pass_complete:
        again.append(mirror_pass_part(conn=CONN, max_keys=K))
    assert sum(res.streams_deleted for res in again) == 0 and _deleted_rows() == deleted
    assert _live_rows() == _scan(r)  # nothing changed in Redis during this pass
