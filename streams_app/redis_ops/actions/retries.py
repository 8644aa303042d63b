"""The event bus's delayed retries: retry now, move to the dead-letter stream, delete.

Each member is taken by ``lua/retry_take.lua``: found by its due time and SHA-1, then added to its
target and removed from the set in one script, as the bus's own pump does (``eventbus/lua/
pump_retries.lua``). So an operator's "retry now" racing a worker's pump, or a second operator,
yields exactly one new entry: whichever script runs first moves the member, the other finds it gone
(``missing``).

"Move to DLQ" writes the fields the bus writes when it gives up (:func:`eventbus.dlq.dead_letter_fields`
plus ``dlq_failed_at`` on the server clock), to the DLQ the bus uses for the stream (``{S}:dlq``), so the
console's DLQ page and requeue treat it like any dead letter.

**Redis Cluster.** ``{S}:retry``, ``S`` and ``{S}:dlq`` share ``S``'s slot (the bus names them so), and
the script runs there. A pre-cluster ``S:retry`` lives in another slot than ``S``: nothing pumps it, so
only an operator moves its members, and moving them here would need the stepwise lease of
:mod:`.moves`; it is refused instead, pointing at ``python -m eventbus migrate``, which moves the old
set into ``{S}:retry`` where this works. Deleting works on either naming (one key).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventbus.dlq import dead_letter_fields
from eventbus.keys import in_slot_of
from eventbus.text import display_text

from ..client import get_client, same_slot
from ..errors import InvalidArgument, translated
from ..parsers import reply_text
from ..retries import (
    RETRY_SUFFIX,
    RetryEntry,
    RetrySet,
    member_ref,
    parse_ref,
    retry_count,
    retry_entries_by_ref,
    retry_entry,
    retry_members,
    with_failures,
)
from ._common import MAX_BATCH, MAX_IDS, _script

MODES = ("stream", "dlq", "delete")
#: Members one bulk request takes at most; the rest stays for the next press (the page says how many).
BULK_LIMIT = 20_000
BULK_BATCH = 500


@dataclass(frozen=True, slots=True)
class RetryTaken:
    ref: str
    #: the new entry in the stream or the DLQ (None for a delete)
    new_id: str | None


@dataclass(frozen=True, slots=True)
class RetryOutcome:
    target: bytes | None  # the stream or DLQ written to (None: delete)
    taken: tuple[RetryTaken, ...]
    missing: tuple[str, ...]  # no longer in the set: the pump re-added them, or someone else acted
    failed: tuple[tuple[str, str], ...] = ()  # (ref, reason): still in the set
    #: bulk only: members still due up to the bound after this request (BULK_LIMIT reached)
    remaining: int = 0


def _refs(refs: Sequence[str]) -> list[str]:
    if isinstance(refs, str | bytes):
        raise InvalidArgument("refs must be a list of retry refs.")
    out = list(dict.fromkeys(refs))
    if not out:
        raise InvalidArgument("No retries selected.")
    if len(out) > MAX_IDS:
        raise InvalidArgument(f"At most {MAX_IDS} retries per call ({len(out)} given).")
    for ref in out:
        parse_ref(ref)
    return out


def _target(conn: str, rset: RetrySet, mode: str) -> bytes | None:
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}.")
    if mode == "delete":
        return None
    target = rset.stream if mode == "stream" else rset.dlq
    if not same_slot(conn, rset.key, target):
        raise InvalidArgument(
            f"{display_text(rset.key)} is the pre-cluster name of the retry set, in another hash slot than "
            f"{display_text(target)}: run `python -m eventbus migrate {display_text(rset.stream)}` to move it to "
            f"{display_text(in_slot_of(rset.stream, RETRY_SUFFIX))}, then act on it there.",
            conn=conn,
        )
    return target


def _dlq_args(rset: RetrySet, entry: RetryEntry, note: str) -> list[bytes | str]:
    """The bus's dead-letter fields for a retry that will not run (the member's fields kept as they are)."""
    if not entry.fields:
        raise InvalidArgument(f"Retry {entry.ref} is not an event bus entry (no msgpack field list).")
    made = max((entry.retries or 1) - 1, 0)  # the member carries the count of the retry it was to be
    return dead_letter_fields(
        fields=dict(entry.fields),
        stream=rset.stream,  # type: ignore[arg-type]  # bytes travel to Redis as they are
        entry_id=entry.failed_entry_id or "",
        group=entry.group or b"",  # type: ignore[arg-type]  # bytes travel to Redis as they are
        error=entry.error
        or "unknown: the retry schedule keeps no error, and the metric events no longer have it",
        traceback=note,
        retries=made,
    )


def _take(
    conn: str, rset: RetrySet, mode: str, target: bytes | None, items: list[tuple[str, list[Any]]]
) -> RetryOutcome:
    """One script call over ``items`` (ref, dlq fields) of one set; at most MAX_IDS of them."""
    args: list[bytes | str | int] = [mode]
    for ref, fields in items:
        due, sha = parse_ref(ref)
        args += [due, sha, len(fields), *fields]
    keys = [rset.key] if target is None else [rset.key, target]
    with translated(conn):
        replies = _script(get_client(conn), "retry_take")(keys=keys, args=args)
    taken: list[RetryTaken] = []
    missing: list[str] = []
    failed: list[tuple[str, str]] = []
    for (ref, _), reply in zip(items, replies, strict=True):
        if reply is None:
            missing.append(ref)
        elif isinstance(reply, bytes) and reply.startswith(b"!"):
            failed.append((ref, f"Redis refused the XADD: {reply_text(reply[1:])}"))
        else:
            taken.append(RetryTaken(ref=ref, new_id=None if target is None else reply_text(reply)))
    return RetryOutcome(target=target, taken=tuple(taken), missing=tuple(missing), failed=tuple(failed))


def retry_take(conn: str, rset: RetrySet, *, mode: str, refs: Sequence[str], note: str = "") -> RetryOutcome:
    """Take the members ``refs`` name: ``stream`` re-adds them now, ``dlq`` dead-letters them, ``delete``
    drops them. ``note`` is the dead letters' ``dlq_traceback`` (who moved it, and why there is no trace)."""
    target = _target(conn, rset, mode)
    wanted = _refs(refs)
    if mode != "dlq":
        return _take(conn, rset, mode, target, [(ref, []) for ref in wanted])
    found = retry_entries_by_ref(conn, rset, wanted)
    failures = {e.ref: e for e in with_failures(conn, rset, [e for e in found if e is not None])}
    items: list[tuple[str, list[Any]]] = []
    gone: list[str] = []
    for ref, entry in zip(wanted, found, strict=True):
        if entry is None:
            gone.append(ref)
        else:
            items.append((ref, _dlq_args(rset, failures[entry.ref], note)))
    outcome = _take(conn, rset, mode, target, items) if items else RetryOutcome(target, (), ())
    return RetryOutcome(
        target=target, taken=outcome.taken, missing=tuple(gone) + outcome.missing, failed=outcome.failed
    )


def retry_take_all(
    conn: str, rset: RetrySet, *, mode: str, up_to_ms: int, note: str = "", limit: int = BULK_LIMIT
) -> RetryOutcome:
    """Take every member due at or before ``up_to_ms`` (the latest due time the operator saw), in batches
    of one read and one script call, at most ``limit`` per request. Retries scheduled later are left."""
    target = _target(conn, rset, mode)
    if isinstance(up_to_ms, bool) or not isinstance(up_to_ms, int) or up_to_ms < 0:
        raise InvalidArgument("up_to must be a due time in ms.")
    taken: list[RetryTaken] = []
    missing: list[str] = []
    failed: list[tuple[str, str]] = []
    offset = 0  # members that failed stay in the set, ahead of the rest: read past them
    batch = min(BULK_BATCH, MAX_BATCH)
    while len(taken) + len(missing) < limit:
        members = retry_members(conn, rset, up_to_ms=up_to_ms, offset=offset, count=batch)
        if not members:
            break
        items = []
        entries = with_failures(conn, rset, [retry_entry(d, m) for m, d in members]) if mode == "dlq" else ()
        for i, (member, due) in enumerate(members):
            ref = member_ref(due, member)
            if mode == "dlq":
                entry = entries[i]
                if not entry.fields:
                    failed.append((ref, "not an event bus entry (no msgpack field list)"))
                    offset += 1
                    continue
                items.append((ref, _dlq_args(rset, entry, note)))
            else:
                items.append((ref, []))
        if items:
            outcome = _take(conn, rset, mode, target, items)
            taken += outcome.taken
            missing += outcome.missing
            failed += outcome.failed
            offset += len(outcome.failed)
        if len(members) < batch:
            break
    remaining = max(retry_count(conn, rset, up_to_ms=up_to_ms) - len(failed), 0)
    return RetryOutcome(
        target=target, taken=tuple(taken), missing=tuple(missing), failed=tuple(failed), remaining=remaining
    )
