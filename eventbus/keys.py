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


def dlq_key(stream: str) -> str:
    """The dead-letter stream of ``stream``."""
    return f"{stream}:dlq"


def retry_key(stream: str) -> str:
    """The sorted set of ``stream``'s delayed retries (score: due time in ms)."""
    return f"{stream}:retry"


def unique_key(stream: str) -> str:
    """The sorted set of ``stream``'s uniqueness keys (score: when the key expires, in ms)."""
    return f"{stream}:unique"


def reply_key(correlation_id: str) -> str:
    """The list a request's reply is pushed to."""
    return f"reply:{correlation_id}"


def progress_key(task_key: str, prefix: str = "progress:") -> str:
    """The progress stream of a task."""
    return f"{prefix}{task_key}"
