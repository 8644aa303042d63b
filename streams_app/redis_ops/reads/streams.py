"""Streams: list them (a bounded SCAN over every primary), rank them by length, and read one
stream's XINFO with its groups and the dead-letter queues that exist for it.

A listing that could not reach every primary of a cluster still answers with what it found and names
the primaries it missed (``missed``): the page or reply says it is partial rather than looking complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from eventbus.conventions import dlq_candidates

from ..client import get_client
from ..commands import SCAN_COUNT, keyed_pipeline, scan_streams
from ..errors import InvalidArgument, translated
from ..parsers import parse_stream
from ..types import StreamInfo, StreamSummary
from .limits import DEFAULT_PAGE, check_count, validate_key


@dataclass(frozen=True, slots=True)
class StreamPage:
    streams: tuple[StreamSummary, ...]
    next_cursor: int  # 0 when the scan is complete (a listing cursor: see commands.listing_cursor)
    scanned: int  # keys SCAN looked at for this page (not only streams)
    missed: tuple[str, ...] = ()  # primaries (host:port) this page could not list or read: it is partial

    @property
    def complete(self) -> bool:
        """Whether every primary answered for this page (the page may still be one of several)."""
        return not self.missed


@dataclass(frozen=True, slots=True)
class LongestPage:
    """One page of the longest streams among those one scan budget found (``?sort=length`` without a mirror)."""

    streams: tuple[StreamSummary, ...]
    sorted_among: int  # streams found and ranked
    scan_complete: bool  # the scan saw the whole keyspace within its budget
    missed: tuple[str, ...] = ()  # primaries not listed or not read: the ranking leaves their streams out


def streams_scan(
    conn: str,
    *,
    match: bytes = b"*",
    cursor: int = 0,
    count: int = DEFAULT_PAGE,
    budget: int | None = None,
) -> StreamPage:
    """One page of the server's streams, found by ``SCAN ... TYPE stream``.

    SCAN looks at no more than ``budget`` keys for one page, so a server with millions of other keys
    answers in bounded time; the page may then hold fewer than ``count`` streams and a non-zero
    cursor to continue from. The per-call COUNT grows while calls come back empty-handed.
    """
    count = check_count(count)
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    if cursor < 0:
        raise InvalidArgument("cursor must not be negative.")
    keys: list[bytes] = []
    scanned = 0
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, match=match, cursor=cursor, count=count, grow_to=SCAN_COUNT, budget=budget):
        keys += step.keys
        cursor, scanned, missed = step.cursor, step.scanned, step.missed
        if len(keys) >= count:
            break
    summaries, unread = stream_summaries_covered(conn, keys)
    return StreamPage(streams=tuple(summaries), next_cursor=cursor, scanned=scanned, missed=_union(missed, unread))


def _union(*lists: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for names in lists for name in names))


def stream_summaries(conn: str, keys: Iterable[bytes]) -> list[StreamSummary]:
    """Length, ends, groups and pending of each stream in ``keys``, in one pipeline.

    Keys that vanished (or changed type) since they were listed are left out, and so are keys whose
    node did not answer (:func:`stream_summaries_covered` names those nodes).
    """
    return stream_summaries_covered(conn, keys)[0]


def stream_summaries_covered(conn: str, keys: Iterable[bytes]) -> tuple[list[StreamSummary], tuple[str, ...]]:
    """:func:`stream_summaries`, and the primaries whose keys could not be read (empty when all answered)."""
    infos, missed = stream_infos_covered(conn, list(keys))
    return [StreamSummary.of(info) for info in infos], missed


def stream_infos(conn: str, keys: Sequence[bytes]) -> list[StreamInfo]:
    """XINFO STREAM and XINFO GROUPS of each stream in ``keys``, in one pipeline (one round trip).

    Keys that vanished (or changed type) since they were listed are left out, and so are keys whose
    node did not answer (:func:`stream_infos_covered` names those nodes).
    """
    return stream_infos_covered(conn, keys)[0]


def stream_infos_covered(conn: str, keys: Sequence[bytes]) -> tuple[list[StreamInfo], tuple[str, ...]]:
    """:func:`stream_infos`, and the primaries whose keys could not be read (empty when all answered)."""
    if not keys:
        return [], ()
    read = keyed_pipeline(conn, keys, lambda key: (("XINFO", "STREAM", key), ("XINFO", "GROUPS", key)))
    out: list[StreamInfo] = []
    for key, replies in zip(keys, read.replies, strict=True):
        if replies is None:
            continue
        info, groups = replies
        if isinstance(info, Exception) or isinstance(groups, Exception):
            continue  # vanished or retyped since it was listed
        out.append(parse_stream(key, info, groups))
    return out, read.missed


def stream_lengths(conn: str, keys: Sequence[bytes], *, chunk: int = 5000) -> dict[bytes, int]:
    """XLEN of many keys, pipelined in chunks (for sorting a scanned set by length)."""
    return stream_lengths_covered(conn, keys, chunk=chunk)[0]


def stream_lengths_covered(
    conn: str, keys: Sequence[bytes], *, chunk: int = 5000
) -> tuple[dict[bytes, int], tuple[str, ...]]:
    """:func:`stream_lengths`, and the primaries whose keys could not be read."""
    lengths: dict[bytes, int] = {}
    missed: tuple[str, ...] = ()
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        read = keyed_pipeline(conn, part, lambda key: (("XLEN", key),))
        missed = _union(missed, read.missed)
        for key, replies in zip(part, read.replies, strict=True):
            if replies is not None and not isinstance(replies[0], Exception):
                lengths[key] = int(replies[0])
    return lengths, missed


def streams_by_length(
    conn: str, *, match: bytes = b"*", count: int = DEFAULT_PAGE, offset: int = 0, budget: int | None = None
) -> LongestPage:
    """The longest streams among at most ``budget`` scanned keys, over every primary.

    For a fresh install only: once the mirror holds the connection, pages and the API rank every
    stream from it instead (a scan budget may leave the longest stream out).
    """
    count = check_count(count)
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    keys: list[bytes] = []
    cursor = 0
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, match=match, count=SCAN_COUNT, budget=budget):
        keys += step.keys
        cursor, missed = step.cursor, step.missed
    lengths, unread = stream_lengths_covered(conn, sorted(keys))
    ranked = sorted(lengths, key=lambda k: (-lengths[k], k))
    page, unread_page = stream_summaries_covered(conn, ranked[offset : offset + count])
    return LongestPage(
        streams=tuple(page), sorted_among=len(lengths), scan_complete=cursor == 0,
        missed=_union(missed, unread, unread_page),
    )


def stream_info(conn: str, key: bytes) -> StreamInfo:
    """XINFO STREAM (never FULL) and XINFO GROUPS of one stream, in one round trip."""
    validate_key(key)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("XINFO", "STREAM", key)
        pipe.execute_command("XINFO", "GROUPS", key)
        info, groups = pipe.execute()
    return parse_stream(key, info, groups)


def is_stream(conn: str, key: bytes) -> bool:
    """Whether ``key`` exists and holds a stream (one TYPE call)."""
    with translated(conn):
        return get_client(conn).type(key) in (b"stream", "stream")


def existing_streams(conn: str, keys: Sequence[bytes]) -> tuple[list[bytes], tuple[str, ...]]:
    """Those of ``keys`` that exist and hold streams, in order (one pipelined TYPE per key), and the
    primaries that did not answer for some of them (a stream's DLQ may live on another node)."""
    if not keys:
        return [], ()
    read = keyed_pipeline(conn, keys, lambda key: (("TYPE", key),))
    found = [
        key for key, replies in zip(keys, read.replies, strict=True)
        if replies is not None and replies[0] in (b"stream", "stream")
    ]
    return found, read.missed


def stream_info_with_dlqs(conn: str, key: bytes) -> tuple[StreamInfo, list[bytes], tuple[str, ...]]:
    """:func:`stream_info` of ``key`` and :func:`existing_streams` of its dead-letter queue's candidate
    keys (:func:`eventbus.conventions.dlq_candidates`), as the stream page shows them, in one pipelined round
    trip where the two calls take two.

    Candidates named after the stream's groups (OmniDaemon's ``omni-dlq:{group}``) are known only once
    the groups are, so a stream that has them costs a second trip for those. As in
    :func:`existing_streams`, a DLQ on a node that does not answer is named in the third item rather
    than failing the page; the stream's own node not answering fails it, as :func:`stream_info` does.
    """
    info, found, missed, _ = stream_facts_and(conn, key, ())
    return info, found, missed


def stream_facts_and(
    conn: str, key: bytes, then: Sequence[Sequence[object]]
) -> tuple[StreamInfo, list[bytes], tuple[str, ...], list[Any] | None]:
    """:func:`stream_info_with_dlqs`, and the replies to ``then`` (commands on ``key`` alone, error replies
    included) sent in the same round trip: the stream page's entries ride with its facts. The replies are
    None when the stream's node did not answer that trip (a cluster's node by node fallback): the
    caller then sends ``then`` on its own."""
    validate_key(key)
    candidates = dlq_candidates(key)
    own_commands: tuple[Sequence[object], ...] = (("XINFO", "STREAM", key), ("XINFO", "GROUPS", key), *then)
    read = keyed_pipeline(conn, [key, *candidates], lambda k: own_commands if k == key else (("TYPE", k),))
    own, *theirs = read.replies
    replies: list[Any] | None = None
    if own is None:  # the cluster fell back node by node and the stream's node was silent: ask it alone
        info = stream_info(conn, key)
    else:
        facts, replies = own[:2], own[2:]
        with translated(conn):
            for reply in facts:
                if isinstance(reply, Exception):
                    raise reply
        info = parse_stream(key, *facts)
    found = [
        candidate for candidate, answers in zip(candidates, theirs, strict=True)
        if answers is not None and answers[0] in (b"stream", "stream")
    ]
    missed = read.missed
    by_group = dlq_candidates(key, [group.name for group in info.groups])[len(candidates) :]
    if by_group:
        found_by_group, missed_by_group = existing_streams(conn, by_group)
        found += found_by_group
        missed = _union(missed, missed_by_group)
    return info, found, missed, replies
