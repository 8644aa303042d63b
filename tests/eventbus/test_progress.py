"""Progress streams: replay from any ID then follow to the terminal event."""

from __future__ import annotations

import asyncio
import threading

import redis

from eventbus import Bus, ProgressEvent
from eventbus.progress import asubscribe, subscribe


def _write_run(bus: Bus, task: str, deltas: int = 10) -> list[bytes]:
    progress = bus.progress(task)
    progress.start({"steps": deltas})
    for step in range(deltas):
        progress.delta({"step": step})
    progress.done({"ok": True})
    return [entry_id for entry_id, _ in bus.client.xrange(f"progress:{task}")]


def test_replay_from_any_id_gives_exactly_the_remaining_events(bus: Bus, r: redis.Redis) -> None:
    ids = _write_run(bus, "report-1")
    assert len(ids) == 12
    events = r.xrange("progress:report-1")
    for position in range(-1, len(ids)):
        after = "0-0" if position < 0 else ids[position].decode()
        got = list(bus.subscribe("report-1", after=after, block_ms=50))
        expected = events[position + 1 :]
        assert [event.id for event in got] == [entry_id.decode() for entry_id, _ in expected]
        assert [event.event for event in got] == [fields[b"event"].decode() for _, fields in expected]
        assert [event.data for event in got] == [fields[b"data"].decode() for _, fields in expected]
    assert list(bus.subscribe("report-1", block_ms=50))[-1].json() == {"ok": True}


def test_replay_pages_through_long_streams(bus: Bus, r: redis.Redis) -> None:
    ids = _write_run(bus, "big", deltas=250)
    got = list(subscribe(bus.client, "progress:big", after=ids[3].decode(), count=7, block_ms=50))
    assert [event.id for event in got] == [entry_id.decode() for entry_id in ids[4:]]


def test_follow_receives_live_events_until_the_terminal_one(bus: Bus, r: redis.Redis) -> None:
    progress = bus.progress("live")
    progress.start()
    received: list[ProgressEvent] = []
    subscribed = threading.Event()

    def follow() -> None:
        for event in bus.subscribe("live", block_ms=50):
            received.append(event)
            subscribed.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    assert subscribed.wait(timeout=10)  # it has replayed "start" and now blocks
    for step in range(5):
        progress.delta({"step": step})
    progress.error(RuntimeError("warehouse went away"))
    thread.join(timeout=10)
    assert not thread.is_alive()

    stored = r.xrange("progress:live")
    assert [event.id for event in received] == [entry_id.decode() for entry_id, _ in stored]
    assert received[-1].event == "error"
    assert received[-1].json() == {"message": "RuntimeError: warehouse went away"}


def test_ttl_after_completion_and_restart(bus: Bus, r: redis.Redis) -> None:
    progress = bus.progress("ttl")
    progress.start()
    running_ttl = r.pttl("progress:ttl")
    progress.done()
    done_ttl = r.pttl("progress:ttl")
    assert 0 < done_ttl <= 3_600_000 < running_ttl
    # A new run replaces the old one.
    progress.start({"run": 2})
    [(_, fields)] = r.xrange("progress:ttl")
    assert fields[b"event"] == b"start"


def test_context_manager_writes_error_on_exception(bus: Bus, r: redis.Redis) -> None:
    try:
        with bus.progress("ctx") as progress:
            progress.delta({"step": 1})
            raise ValueError("bad input")
    except ValueError:
        pass
    assert [fields[b"event"] for _, fields in r.xrange("progress:ctx")] == [b"start", b"delta", b"error"]


def test_subscribe_ends_on_missing_or_finished_streams(bus: Bus, r: redis.Redis) -> None:
    assert list(bus.subscribe("never-started", block_ms=50)) == []
    ids = _write_run(bus, "finished", deltas=1)
    # A client resuming after the terminal event gets nothing and is not left waiting.
    assert list(bus.subscribe("finished", after=ids[-1].decode(), block_ms=5_000)) == []


def test_async_writer_and_subscriber(bus: Bus, r: redis.Redis) -> None:
    async def scenario() -> list[str]:
        task = bus.aprogress("async")
        await task.start()
        await task.delta({"step": 1})
        await task.done()
        got = [event.id async for event in asubscribe(bus.aclient, "progress:async", block_ms=50) if event]
        await bus.aclient.aclose()
        return got

    got = asyncio.run(scenario())
    assert got == [entry_id.decode() for entry_id, _ in r.xrange("progress:async")]
