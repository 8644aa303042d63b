"""Exceptions raised to, and by, users of the bus."""

from __future__ import annotations


class EventBusError(Exception):
    """Base class of everything the bus raises on purpose."""


class DuplicateEvent(EventBusError):
    """A publish was refused because its uniqueness key is still held."""

    def __init__(self, stream: str, unique_key: str) -> None:
        super().__init__(f"An event with uniqueness key {unique_key!r} was already published to {stream!r}.")
        self.stream = stream
        self.unique_key = unique_key


class RequestTimeout(EventBusError, TimeoutError):
    """No reply arrived within the request's timeout (no worker, a slow one, or a lost reply)."""

    def __init__(self, stream: str, type: str, correlation_id: str, timeout: float) -> None:
        super().__init__(
            f"No reply to {type!r} on {stream!r} within {timeout:g}s (correlation_id={correlation_id})."
        )
        self.stream = stream
        self.type = type
        self.correlation_id = correlation_id
        self.timeout = timeout


class RequestFailed(EventBusError):
    """The handler of a request failed for good: the request was dead-lettered."""

    def __init__(self, correlation_id: str, error: str) -> None:
        super().__init__(f"Request {correlation_id} failed: {error}")
        self.correlation_id = correlation_id
        self.error = error


class MalformedEvent(EventBusError):
    """A stream entry is not an event this bus can decode (missing ``type``, bad JSON...).

    Such an entry can never succeed, so the worker dead-letters it at once instead of retrying.
    """


class Reject(Exception):  # noqa: N818 - reads as an action in handler code: ``raise Reject(...)``
    """Raise from a handler to dead-letter the event now, skipping the remaining retries.

    For failures that retrying cannot fix: a malformed payload, a business rule violation.
    """


class SlotUnsafeStream(EventBusError, ValueError):
    """On a Redis Cluster, a stream whose name has a ``}`` but no ``{tag}`` cannot have its retry set,
    DLQ and unique set in its own slot, so the scripts that keep it crash-safe cannot run on it."""

    def __init__(self, stream: str, what: str) -> None:
        tagged = "{" + stream.replace("}", "") + "}"
        super().__init__(
            f"Stream {stream!r} cannot {what} on a Redis Cluster: its name has a '}}' but no {{tag}}, so its "
            f"retry set, dead letters and unique keys cannot share its hash slot. Rename it (e.g. {tagged!r})."
        )
        self.stream = stream
