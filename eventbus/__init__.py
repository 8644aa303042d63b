"""A Redis Streams event bus: publish events, handle them in consumer groups, retry, dead-letter.

    from eventbus import Bus

    bus = Bus.from_url("redis://localhost:6379/0")

    @bus.on("order.created", stream="orders", group="billing")
    def charge(event):
        ...

    bus.publish("orders", "order.created", {"order_id": 7})
    bus.run(groups={"billing"}, concurrency=8)   # or: python -m eventbus worker app:bus

Delivery is at least once: an entry is acknowledged only after its handler returned, failures
are retried with exponential backoff, and after ``max_retries`` the entry moves to
``{stream}:dlq``. See the modules for the details and the reasons behind them.

What the bus keeps in Redis (names in :mod:`eventbus.keys`; ``S`` is a stream's name, and
``{S}`` makes a key hash like ``S``, so on a Redis Cluster each stream's keys share its slot):

==========================  ==========  ==============================================================
``S``                       stream      events: ``type``, ``data`` (JSON), ``id``, ``ts``, ... (codec)
``{S}:retry``               sorted set  delayed retries, scored by due time in ms (retry)
``{S}:dlq``                 stream      dead letters: original fields + ``dlq_*`` fields (dlq)
``{S}:unique``              sorted set  uniqueness keys, scored by expiry in ms (producer)
``{S}:metrics``             stream      metric events of the stream's handlers (metrics)
``reply:<correlation_id>``  list        a request's reply, with a TTL (producer)
``progress:<task>``         stream      a task's progress events, TTL after the end (progress)
==========================  ==========  ==============================================================

A stream already named with a tag keeps it: ``{orders}.v2`` has ``{orders}.v2:dlq``. The URL may say
``?cluster=yes`` or ``?cluster=no``; otherwise the bus asks the server once (:mod:`eventbus.connection`).
Before the cluster naming the companion keys were ``S:retry``, ``S:dlq``, ``S:unique`` and one
``eventbus:metrics``: :mod:`eventbus.keys` says how to migrate.
"""

from __future__ import annotations

from .bus import Bus
from .codec import Event
from .errors import DuplicateEvent, EventBusError, MalformedEvent, Reject, RequestFailed, RequestTimeout
from .producer import Message
from .progress import ProgressEvent, ProgressOptions
from .retry import RetryPolicy
from .worker import Worker, WorkerConfig

__all__ = [
    "Bus",
    "DuplicateEvent",
    "Event",
    "EventBusError",
    "MalformedEvent",
    "Message",
    "ProgressEvent",
    "ProgressOptions",
    "Reject",
    "RequestFailed",
    "RequestTimeout",
    "RetryPolicy",
    "Worker",
    "WorkerConfig",
]
