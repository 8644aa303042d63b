"""Key and field names: the conventions other programs (the console, the pipeline) rely on.

Everything the bus writes to Redis is named here, so a reader of the bus's data can import this
module instead of copying string literals. Changing a name here is a wire-format change.
"""

from __future__ import annotations

#: Stream of metric events written by every worker (see :mod:`eventbus.metrics`).
METRICS_STREAM = "eventbus:metrics"

# Fields of an event entry.
F_TYPE = "type"
F_DATA = "data"
F_ID = "id"
F_TS = "ts"
F_CORRELATION_ID = "correlation_id"
F_REPLY_TO = "reply_to"
#: how many times the event has already been retried (absent means 0)
F_RETRIES = "_retries"
#: set on re-added retries: only this consumer group processes the entry, the others skip it
F_GROUP = "_group"
#: the uniqueness key the event was published with, if any
F_UNIQUE = "_unique"

# Fields added to a dead-lettered entry, next to its original fields.
DLQ_ORIGINAL_STREAM = "dlq_original_stream"
DLQ_ORIGINAL_ID = "dlq_original_id"
DLQ_GROUP = "dlq_group"
DLQ_ERROR = "dlq_error"
DLQ_TRACEBACK = "dlq_traceback"
DLQ_RETRIES = "dlq_retries"
DLQ_FAILED_AT = "dlq_failed_at"

# Fields of a progress entry.
P_EVENT = "event"
P_DATA = "data"
P_TS = "ts"


def hash_tag(key: str) -> str | None:
    """The part of ``key`` Redis Cluster hashes, when it has a ``{tag}``: the text between the first
    ``{`` and the first ``}`` after it, if that text is not empty (the cluster spec's rule)."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end < 0 or end == start + 1:
        return None
    return key[start + 1 : end]


def in_slot_of(stream: str, suffix: str) -> str:
    """``stream``'s companion key ``suffix`` (":dlq", ":retry"...), named to live in ``stream``'s hash slot.

    - a stream with a ``{tag}`` keeps its name: ``{orders}.v2`` -> ``{orders}.v2:dlq``;
    - a stream without one is wrapped: ``orders`` -> ``{orders}:dlq``, which hashes ``orders``, as the
      stream itself does;
    - a stream with a ``}`` but no valid tag cannot be wrapped (the tag would end early): it keeps the
      pre-cluster name ``<stream><suffix>``, which works on one node and not in a script on a cluster.
    """
    if hash_tag(stream) is not None or "}" in stream:
        return f"{stream}{suffix}"
    return f"{{{stream}}}{suffix}"


def stream_of(key: str, suffix: str) -> str | None:
    """The stream whose companion ``suffix`` key ``key`` is (either naming), or None."""
    if not key.endswith(suffix) or len(key) == len(suffix):
        return None
    base = key[: -len(suffix)]
    if base.startswith("{") and base.endswith("}") and in_slot_of(base[1:-1], suffix) == key:
        return base[1:-1]
    return base


def dlq_key(stream: str) -> str:
    """The dead-letter stream of ``stream``, in its slot (see :func:`in_slot_of`)."""
    return in_slot_of(stream, ":dlq")


def retry_key(stream: str) -> str:
    """The sorted set of ``stream``'s delayed retries (score: due time in ms), in its slot."""
    return in_slot_of(stream, ":retry")


def unique_key(stream: str) -> str:
    """The sorted set of ``stream``'s uniqueness keys (score: when the key expires, in ms), in its slot."""
    return in_slot_of(stream, ":unique")


def reply_key(correlation_id: str) -> str:
    """The list a request's reply is pushed to."""
    return f"reply:{correlation_id}"


def progress_key(task_key: str, prefix: str = "progress:") -> str:
    """The progress stream of a task."""
    return f"{prefix}{task_key}"
