"""streaQ with a real worker, for tests/console/interop/test_streaq.py.

Three tasks are enqueued and their IDs written; on ``run`` the worker starts and writes its ID; it
finishes two tasks and holds the third until ``release``; on ``stop`` it is stopped the way streaQ's
``burst`` does, once the queue is empty.
"""

from __future__ import annotations

from typing import Any

import anyio
from _wire import WAIT, Commands, emit, main
from streaq import Worker


class ThreadWorker(Worker):
    """streaQ's worker minus its SIGINT/SIGTERM handler: the test stops it with ``stop`` instead."""

    async def signal_handler(self, scope: Any) -> None:
        await anyio.sleep_forever()


async def worker_streams(url: str, *, note: str) -> None:
    commands = Commands()
    release = commands.event("release")
    worker = ThreadWorker(redis_url=url, queue_name="shop", concurrency=2)

    @worker.task()
    async def add(a: int, b: int) -> int:
        return a + b

    @worker.task()
    async def hold(note: str) -> str:
        with anyio.fail_after(WAIT):
            while not release.is_set():
                await anyio.sleep(0.02)
        return note

    tasks = [await add.enqueue(1, 2), await add.enqueue(3, 4), await hold.enqueue(note)]
    emit(task_ids=[t.id for t in tasks])
    await commands.wait("run")

    async with anyio.create_task_group() as group:
        group.start_soon(worker.run_async)
        emit(worker_id=worker.id)
        await commands.wait("stop", timeout=120)
        worker.burst = True  # run_async returns once the queue is empty; the test bounds the wait
    emit(stopped=True)


if __name__ == "__main__":
    main({"worker_streams": worker_streams})
