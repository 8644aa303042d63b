"""OmniDaemon's ``RedisStreamEventBus`` for tests/console/interop/test_omnidaemon.py: an agent whose
callback fails until OmniDaemon's reclaim loop dead-letters its messages, and later the same agent,
fixed, consuming what the console requeued. ``JSON_STORAGE_DIR`` comes from the test's environment
(OmniDaemon reads it at import time)."""

from __future__ import annotations

import redis
from _wire import WAIT, emit, main

from tests.polling import until

TOPIC, AGENT = "file.uploaded", "file-processor"
STREAM, GROUP = f"omni-stream:{TOPIC}", f"group:{TOPIC}:{AGENT}"
DLQ = f"omni-dlq:{GROUP}"


def make_bus(url: str):
    from omnidaemon.event_bus.redis_stream_bus import RedisStreamEventBus

    # reclaim at once and after one retry, so the DLQ is reached in a few loop turns
    return RedisStreamEventBus(redis_url=url, reclaim_interval=0.02, default_reclaim_idle_ms=1,
                               default_dlq_retry_limit=1)


async def _also(bus, r: redis.Redis, agents: list[str]):
    """Subscribe ``agents`` whose callback succeeds; returns whether each has consumed the whole stream."""

    async def fine(payload: dict) -> None:
        pass

    for agent in agents:
        await bus.subscribe(TOPIC, agent, fine)

    def settled() -> bool:
        if not agents:
            return True
        last = r.xrevrange(STREAM, count=1)[0][0]
        rows = {g["name"].decode(): g for g in r.xinfo_groups(STREAM)}
        return all((row := rows.get(f"group:{TOPIC}:{a}")) and row["pending"] == 0
                   and row["last-delivered-id"] == last for a in agents)

    return settled


async def fail_then_dead_letter(url: str, *, messages: list[list], error: str, dead: int,
                                also: list[str] = ()) -> None:
    """Each of ``messages`` ([task ID, content]) published to the agent, whose callback raises ``error``
    (``{filename}`` replaced by the content's) for a content with ``fail``; until ``dead`` of them are in
    the DLQ and none is pending. The agents ``also`` names handle every message without failing."""
    r = redis.Redis.from_url(url)
    bus = make_bus(url)

    async def process(payload: dict) -> None:
        if payload["content"].get("fail"):
            raise RuntimeError(error.replace("{filename}", str(payload["content"].get("filename"))))

    try:
        await bus.subscribe(TOPIC, AGENT, process)
        settled = await _also(bus, r, list(also))
        for task_id, content in messages:
            await bus.publish({"topic": TOPIC, "id": task_id, "payload": {"content": content},
                               "correlation_id": f"req-{task_id}"})
        await until(lambda: r.xlen(DLQ) == dead and r.xpending(STREAM, GROUP)["pending"] == 0 and settled(),
                    what="OmniDaemon to dead-letter the failing messages", timeout=WAIT)
    finally:
        await bus.close()
    emit(done=True)


async def consume_requeued(url: str, *, count: int, last_id: str, also: list[str] = ()) -> None:
    r = redis.Redis.from_url(url)
    bus = make_bus(url)
    consumed: list[dict] = []

    async def process(payload: dict) -> None:
        consumed.append(payload)

    def delivered(group: str) -> bytes:
        return next(g for g in r.xinfo_groups(STREAM) if g["name"].decode() == group)["last-delivered-id"]

    try:
        await bus.subscribe(TOPIC, AGENT, process)
        settled = await _also(bus, r, list(also))
        await until(lambda: len(consumed) == count and r.xpending(STREAM, GROUP)["pending"] == 0
                    and delivered(GROUP).decode() == last_id and settled(),
                    what="OmniDaemon to consume the requeued messages", timeout=WAIT)
    finally:
        await bus.close()
    emit(consumed=consumed)


if __name__ == "__main__":
    main({"fail_then_dead_letter": fail_then_dead_letter, "consume_requeued": consume_requeued})
