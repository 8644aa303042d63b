"""taskiq's ``RedisStreamBroker`` writing the streams tests/console/interop/test_taskiq.py reads back."""

from __future__ import annotations

from _wire import emit, main


async def stream_broker(url: str, *, origin: str) -> None:
    """Tasks kicked with the JSON serializer (the default) and with ``MSGPackSerializer``; the
    broker's own ``listen()`` reads two tasks for its group and acks one."""
    from taskiq.serializers import MSGPackSerializer
    from taskiq_redis import RedisStreamBroker

    kicked: dict[str, list[str]] = {"taskiq:jobs": [], "taskiq:packed": []}
    broker = RedisStreamBroker(url, queue_name="taskiq:jobs", consumer_group_name="taskiq-workers",
                               consumer_name="worker-a", xread_count=2, xread_block=100)

    @broker.task(task_name="billing.charge")
    async def charge(order_id: int, amount: float, note: str = "") -> None:
        return None

    await broker.startup()
    try:
        for i in range(4):
            kicked["taskiq:jobs"].append((await charge.kiq(i, 9.5 + i)).task_id)
        task = await charge.kicker().with_labels(origin=origin).kiq(order_id=99, amount=1.0, note="naïve")
        kicked["taskiq:jobs"].append(task.task_id)
        messages = broker.listen()
        first = await messages.__anext__()
        await messages.__anext__()  # read, not acked: stays pending
        await first.ack()
        await messages.aclose()
    finally:
        await broker.shutdown()

    packed = RedisStreamBroker(url, queue_name="taskiq:packed", consumer_group_name="taskiq-workers")
    packed.with_serializer(MSGPackSerializer())

    @packed.task(task_name="reports.build")
    async def build(day: str, *, full: bool) -> None:
        return None

    await packed.startup()
    try:
        kicked["taskiq:packed"].append((await build.kiq("2026-01-31", full=True)).task_id)
    finally:
        await packed.shutdown()
    emit(kicked=kicked)


if __name__ == "__main__":
    main({"stream_broker": stream_broker})
