"""What a dead-lettered entry holds.

A DLQ entry (in ``{stream}:dlq``) is the original entry's fields, unchanged, followed by:

========================  ====================================================================
``dlq_original_stream``   the stream the entry came from (where a requeue sends it back)
``dlq_original_id``       the entry ID that failed last (retries are new entries: ``_first_id``,
                          kept from the retries, is the first publish; ``id`` the event id)
``dlq_group``             the consumer group whose handler gave up
``dlq_error``             ``ExceptionType: message`` of the last failure, at most 1,000 chars
``dlq_traceback``         the last failure's traceback, trimmed to its last 4,000 characters
``dlq_retries``           how many retries were made before giving up
``dlq_failed_at``         when it was dead-lettered, ms since the epoch (Redis server clock)
========================  ====================================================================

Moving the entry and acknowledging the original are one Lua script (``lua/dead_letter.lua``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import keys

ERROR_LIMIT = 1_000
TRACEBACK_LIMIT = 4_000

_DLQ_PREFIX = b"dlq_"


def format_error(exc: BaseException) -> str:
    text = f"{type(exc).__qualname__}: {exc}"
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"


def trim_traceback(text: str, limit: int = TRACEBACK_LIMIT) -> str:
    """Keep the end of a traceback: the innermost frames and the error are what explain it."""
    if len(text) <= limit:
        return text
    tail = text[-(limit - 40) :]
    # Start at a line boundary so the first frame shown is whole.
    newline = tail.find("\n")
    if 0 <= newline < 200:
        tail = tail[newline + 1 :]
    return f"… ({len(text) - len(tail)} characters trimmed)\n{tail}"


def dead_letter_fields(
    *,
    fields: Mapping[bytes, bytes],
    stream: str,
    entry_id: str,
    group: str,
    error: str,
    traceback: str,
    retries: int,
) -> list[bytes | str]:
    """Field name/value pairs of the DLQ entry, except ``dlq_failed_at`` (the script adds it).

    ``dlq_*`` fields already on the entry (a dead letter requeued by hand without cleaning) are
    dropped so the new ones are not shadowed by stale duplicates.
    """
    pairs: list[bytes | str] = []
    for name, value in fields.items():
        if not name.startswith(_DLQ_PREFIX):
            pairs += (name, value)
    pairs += (
        keys.DLQ_ORIGINAL_STREAM,
        stream,
        keys.DLQ_ORIGINAL_ID,
        entry_id,
        keys.DLQ_GROUP,
        group,
        keys.DLQ_ERROR,
        error,
        keys.DLQ_TRACEBACK,
        trim_traceback(traceback),
        keys.DLQ_RETRIES,
        str(retries),
    )
    return pairs


async def move_to_dlq(
    scripts: Any,
    *,
    stream: str,
    group: str,
    entry_id: str,
    consumer: str,
    fields: Mapping[bytes, bytes],
    error: str,
    traceback: str,
    retries: int,
    maxlen: int | None,
) -> str | None:
    """Dead-letter a pending entry and ack it (``lua/dead_letter.lua``); ``None`` if it is no longer ours."""
    pairs = dead_letter_fields(
        fields=fields,
        stream=stream,
        entry_id=entry_id,
        group=group,
        error=error,
        traceback=traceback,
        retries=retries,
    )
    new_id = await scripts.dead_letter(
        keys=[stream, keys.dlq_key(stream)],
        args=[group, entry_id, consumer, "" if maxlen is None else maxlen, *pairs],
    )
    return None if new_id is None else new_id.decode()
