"""A Bus for the worker subprocesses of the crash tests (``python -m eventbus worker tests.eventbus.apps:bus``).

Its handler writes down every event it starts and finishes in Redis lists, with a plain RPUSH
that is not part of the bus, so the tests count deliveries independently of the bus's own
bookkeeping. ``EVENTBUS_TEST_SLEEP`` sets how long a handler works.
"""

from __future__ import annotations

import os
import time

from eventbus import Bus, Event

bus = Bus.from_url(os.environ.get("EVENTBUS_TEST_URL", "redis://127.0.0.1:6379/0"), maxlen=None)
SLEEP = float(os.environ.get("EVENTBUS_TEST_SLEEP", "0.01"))

STARTED = "test:started"
FINISHED = "test:finished"


@bus.on("job", stream="jobs", group="workers", start="0")
def job(event: Event) -> None:
    bus.client.rpush(STARTED, event.data["n"])
    time.sleep(SLEEP)
    bus.client.rpush(FINISHED, event.data["n"])
