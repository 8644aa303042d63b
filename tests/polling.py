"""The suite's one way to wait for something: poll with a bound, fail with what was awaited.

Nothing in the suite sleeps a fixed time to let work happen; it polls a condition that an
independent source (Redis, the database, a socket) decides, and a hang fails after ``timeout``
seconds instead of blocking the run. ``wait_for`` serves synchronous tests; ``until`` is its
asyncio twin, whose condition may itself be a coroutine function.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

STEP_S = 0.02


def wait_for(predicate: Callable[[], Any], *, what: str, timeout: float = 10.0, step: float = STEP_S) -> Any:
    """Poll until ``predicate()`` is truthy and return that value; raise AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


async def until(predicate: Callable[[], Any], *, what: str, timeout: float = 10.0, step: float = STEP_S) -> Any:
    """``wait_for`` inside an event loop: ``predicate`` may return a value or an awaitable."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(step)
