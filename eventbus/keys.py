"""Key and field names: the conventions other programs (monitoring tools, data pipelines) rely on.

Everything the bus writes to Redis is named here, so a reader of the bus's data can import this
module instead of copying string literals. Changing a name here is a wire-format change.

**Slots.** Redis Cluster runs a Lua script only when all its keys hash to one slot, and the bus's
crash safety rests on scripts over a stream and one companion key (ack + schedule a retry, ack +
dead-letter, re-add a due retry, publish unless a unique key is held). So every companion key of a
stream is named to hash like the stream (:func:`in_slot_of`): ``orders`` has ``{orders}:retry``,
``{orders}:dlq``, ``{orders}:unique`` and ``{orders}:metrics``; ``{orders}.v2`` has ``{orders}.v2:dlq``
and so on. On one server the names change nothing but the spelling.

**Metrics** are written per stream, to ``{stream}:metrics`` (:func:`metrics_key`), rather than to
one ``eventbus:metrics``: a worker's flush is one pipeline, and on a cluster one key for every
stream would put all metric traffic on one node, while per-stream keys spread it with the streams
and lose nothing when a node holding another stream is down. A reader finds them with
``SCAN MATCH *:metrics TYPE stream`` on every primary, or, for one stream, by name.

Migration from the pre-cluster names (workers before this naming wrote ``orders:retry``,
``orders:dlq``, ``orders:unique`` and ``eventbus:metrics``):

=====================  ======================  ================================================
old                    new                     what to do
=====================  ======================  ================================================
``orders:retry``       ``{orders}:retry``      nothing pumps the old set any more: after the new
                                               workers are deployed, move its members to the
                                               stream (``python -m eventbus migrate``) or wait
                                               until they are due and run it then
``orders:dlq``         ``{orders}:dlq``        old dead letters stay where they are; readers
                                               list both and requeue from either
``orders:unique``      ``{orders}:unique``     keys held in the old set are forgotten: a
                                               duplicate published in the first ``unique_ttl``
                                               after the upgrade is accepted once
``eventbus:metrics``   ``{orders}:metrics``    readers read both until the old stream ages
                                               out; delete it when its newest entry is older
                                               than the longest metrics window (1 h)
=====================  ======================  ================================================

A stream whose name has a ``}`` but no valid ``{tag}`` (``a}b``) cannot be given companion keys in
its slot: it keeps the old names, which work on one server; on a cluster the bus refuses to retry,
dead-letter or unique-publish on it (:func:`slot_safe`) and says to rename it.
"""

from __future__ import annotations

from typing import AnyStr

#: The one stream of metric events that workers before the cluster naming wrote for every stream.
#: No longer written; readers keep reading it for a migration window (see the module docstring).
METRICS_STREAM = "eventbus:metrics"

DLQ_SUFFIX = ":dlq"
RETRY_SUFFIX = ":retry"
UNIQUE_SUFFIX = ":unique"
METRICS_SUFFIX = ":metrics"

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
#: set on re-added retries: the entry ID the event was first published as (kept across retries)
F_FIRST_ID = "_first_id"
#: set on re-added retries: the entry ID whose failure scheduled this retry (the previous attempt)
F_FAILED_ID = "_failed_id"
#: set on re-added retries: when that failure scheduled the retry, ms on the Redis server's clock
F_FAILED_AT = "_failed_at"

# Fields added to a dead-lettered entry, next to its original fields.
DLQ_ORIGINAL_STREAM = "dlq_original_stream"
DLQ_ORIGINAL_ID = "dlq_original_id"
DLQ_GROUP = "dlq_group"
DLQ_ERROR = "dlq_error"
DLQ_TRACEBACK = "dlq_traceback"
DLQ_RETRIES = "dlq_retries"
# dlq_failed_at (ms, Redis server clock) is added by lua/dead_letter.lua itself, next to the ones above.

# Fields of a progress entry.
P_EVENT = "event"
P_DATA = "data"
P_TS = "ts"


def hash_tag(key: AnyStr) -> AnyStr | None:
    """The part of ``key`` Redis Cluster hashes, when it has a ``{tag}``: the text between the first
    ``{`` and the first ``}`` after it, if that text is not empty (the cluster spec's rule).

    ``key`` may be text (what the bus names) or bytes (what a reader of Redis holds).
    """
    opening, closing = _braces(key)
    start = key.find(opening)
    if start < 0:
        return None
    end = key.find(closing, start + 1)
    if end < 0 or end == start + 1:
        return None
    return key[start + 1 : end]


def _braces(key: AnyStr) -> tuple[AnyStr, AnyStr]:
    return (b"{", b"}") if isinstance(key, bytes) else ("{", "}")


def slot_safe(stream: AnyStr) -> bool:
    """Whether ``stream``'s companion keys can share its slot: false only for a ``}`` with no valid tag.

    On a cluster such a stream still takes plain publishes, but no retry, dead letter or unique
    publish (each is one script over the stream and a companion key): the bus refuses it up front.
    """
    return hash_tag(stream) is not None or _braces(stream)[1] not in stream


def in_slot_of(stream: AnyStr, suffix: AnyStr) -> AnyStr:
    """``stream``'s companion key ``suffix`` (":dlq", ":retry"...), named to live in ``stream``'s hash slot.

    - a stream with a ``{tag}`` keeps its name: ``{orders}.v2`` -> ``{orders}.v2:dlq``;
    - a stream without one is wrapped: ``orders`` -> ``{orders}:dlq``, which hashes ``orders``, as the
      stream itself does;
    - a stream with a ``}`` but no valid tag cannot be wrapped (the tag would end early): it keeps the
      pre-cluster name ``<stream><suffix>``, which works on one node and not in a script on a cluster
      (see :func:`slot_safe`).
    """
    opening, closing = _braces(stream)
    if hash_tag(stream) is not None or closing in stream:
        return stream + suffix
    return opening + stream + closing + suffix


def stream_of(key: AnyStr, suffix: AnyStr) -> AnyStr | None:
    """The stream whose companion ``suffix`` key ``key`` is (either naming), or None."""
    if not key.endswith(suffix) or len(key) == len(suffix):
        return None
    base = key[: -len(suffix)]
    opening, closing = _braces(key)
    if base.startswith(opening) and base.endswith(closing) and in_slot_of(base[1:-1], suffix) == key:
        return base[1:-1]
    return base


def dlq_key(stream: str) -> str:
    """The dead-letter stream of ``stream``, in its slot (see :func:`in_slot_of`)."""
    return in_slot_of(stream, DLQ_SUFFIX)


def retry_key(stream: str) -> str:
    """The sorted set of ``stream``'s delayed retries (score: due time in ms), in its slot."""
    return in_slot_of(stream, RETRY_SUFFIX)


def unique_key(stream: str) -> str:
    """The sorted set of ``stream``'s uniqueness keys (score: when the key expires, in ms), in its slot."""
    return in_slot_of(stream, UNIQUE_SUFFIX)


def metrics_key(stream: AnyStr) -> AnyStr:
    """The metric events of ``stream``'s handlers (see :mod:`eventbus.metrics`), in its slot."""
    return in_slot_of(stream, METRICS_SUFFIX.encode() if isinstance(stream, bytes) else METRICS_SUFFIX)


def is_metrics_key(key: bytes) -> bool:
    """Whether ``key`` is a stream of the bus's metric events: the old shared ``eventbus:metrics`` or a
    stream's own ``{S}:metrics`` named exactly as :func:`metrics_key` names it (a user's ``orders:metrics``,
    which the bus would have named ``{orders}:metrics``, is an ordinary stream)."""
    if key == METRICS_STREAM.encode():
        return True
    stream = stream_of(key, METRICS_SUFFIX.encode())
    return stream is not None and in_slot_of(stream, METRICS_SUFFIX.encode()) == key


def legacy_key(stream: str, suffix: str) -> str:
    """The pre-cluster name of a companion key (``orders:dlq``), for migrating what is left there."""
    return f"{stream}{suffix}"


def reply_key(correlation_id: str) -> str:
    """The list a request's reply is pushed to."""
    return f"reply:{correlation_id}"


def progress_key(task_key: str, prefix: str = "progress:") -> str:
    """The progress stream of a task."""
    return f"{prefix}{task_key}"
