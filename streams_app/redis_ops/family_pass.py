"""The Redis side of the rolling family pass (docs/operations.md#stream-families): one bounded step a
snapshot tick, going on from where the previous tick's step stopped.

A server in family mode holds more keys than one tick may read, so the pass that sums its streams by
family is spread over ticks: each step goes on with ``SCAN ... TYPE stream`` over every primary
(:func:`~.commands.scan_streams`, its cursor carrying the node's index on a cluster) from the cursor the
caller saved, and reads at most ``max_keys`` stream keys, by one pipelined round trip of ``XINFO STREAM``
and ``XINFO GROUPS`` per :data:`CHUNK` keys (:func:`.reads.streams.stream_infos_covered`). SCAN may hand
out a few keys more than its ``COUNT``: those beyond the step's allowance are returned in ``carry``, to be
read first by the next step, so no step reads more than ``max_keys`` keys and none is lost. A key that
expired (or changed type) between SCAN and XINFO answers an error and is left out, as SCAN's guarantee
allows: only keys present for the whole pass are certain to be counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .commands import SCAN_COUNT, scan_streams
from .reads.streams import stream_infos_covered
from .types import StreamInfo

#: Keys per pipelined XINFO round trip.
CHUNK = 1000
#: The cursor of a pass whose SCAN is complete, with keys left in its carry (0 would start the SCAN again).
SCAN_DONE = -1
#: A step's SCAN looks at most this many times ``max_keys`` keys of every type: a keyspace of few streams
#: among many other keys is gone through over several ticks too, not in one.
LOOK_FACTOR = 4
#: The smallest SCAN COUNT a step asks for (a step with few keys left still moves on).
_COUNT_MIN = 10


@dataclass(frozen=True, slots=True)
class FamilyPassStep:
    streams: tuple[StreamInfo, ...]  # the keys read (vanished ones left out)
    read: int  # keys sent to XINFO: at most the step's ``max_keys``
    cursor: int  # where the next step's SCAN goes on: :data:`SCAN_DONE` once the SCAN is complete
    scan_done: bool  # the SCAN came back to cursor 0 on the last primary
    carry: tuple[bytes, ...]  # keys SCAN handed out beyond the allowance: the next step reads them first
    scanned: int  # keys (of every type) the step's SCAN calls looked at
    missed: tuple[str, ...] = ()  # primaries not listed or not read: their streams are absent

    @property
    def done(self) -> bool:
        """The pass has read every key it found."""
        return self.scan_done and not self.carry


def family_pass_step(
    conn: str, *, cursor: int, carry: Sequence[bytes] = (), max_keys: int, chunk: int = CHUNK
) -> FamilyPassStep:
    """Read the next at most ``max_keys`` stream keys of the pass: ``carry`` first, then SCAN from ``cursor``
    (0 starts the pass; :data:`SCAN_DONE`: the SCAN is complete, only the carry is left)."""
    max_keys = max(1, max_keys)
    keys = list(carry)
    scanned = 0
    scan_done = cursor == SCAN_DONE
    missed: dict[str, None] = {}
    if len(keys) < max_keys and not scan_done:
        count = min(SCAN_COUNT, max(_COUNT_MIN, max_keys - len(keys)))
        for step in scan_streams(conn, cursor=cursor, count=count):
            keys += step.keys
            cursor, scanned = step.cursor, step.scanned
            missed.update(dict.fromkeys(step.missed))
            if step.cursor == 0:
                scan_done = True
                break
            if len(keys) >= max_keys or scanned >= LOOK_FACTOR * max_keys:
                break
        else:
            scan_done = True
    keys, rest = keys[:max_keys], tuple(keys[max_keys:])
    if scan_done:
        cursor = SCAN_DONE
    infos: list[StreamInfo] = []
    for start in range(0, len(keys), chunk):
        found, unread = stream_infos_covered(conn, keys[start : start + chunk])
        infos += found
        missed.update(dict.fromkeys(unread))
    return FamilyPassStep(
        streams=tuple(infos), read=len(keys), cursor=cursor, scan_done=scan_done, carry=rest, scanned=scanned,
        missed=tuple(missed),
    )
