"""What the tail hands its clients: entries encoded once, batches shared as websocket frames.

Kept apart from :mod:`streams_app.live.hub` so that the hub and its filter groups
(:mod:`streams_app.live.filtering`) build the same frames without importing each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streams_app.live.wire import text_frame
from streams_app.redis_ops.types import Entry

Sid = tuple[int, int]

#: Entries per websocket frame at most (a frame of 200 small entries is ~100 KB).
FRAME_MAX = 200


def dumps(frame: dict[str, Any]) -> str:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class LiveEntry:
    """One entry as every client receives it: its frame is encoded once and shared.

    ``shown`` is the entry the frame was built from (masked): a filter reads that one and no other, so
    it finds what the client is shown and nothing a mask hides (search does the same).
    """

    id: str
    sid: Sid
    frame: str  # {"type": "entry", "id", "fields", "decoded"} (docs/api.md#the-live-tails-frames)
    shown: Entry


def entries_frame(batch: Sequence[LiveEntry]) -> str:
    """One entry as itself, several as ``{"type": "entries", "entries": [...]}`` (pre-encoded JSON)."""
    if len(batch) == 1:
        return batch[0].frame
    return '{"type":"entries","entries":[' + ",".join(e.frame for e in batch) + "]}"


def chunks(items: Sequence[LiveEntry], size: int) -> Iterable[Sequence[LiveEntry]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Batch:
    """What one read brought for one stream (or what of it one filter kept), as every subscriber receives it.

    Its websocket frames (one per :data:`FRAME_MAX` entries) are built on first use and then shared:
    every client written to directly gets the very same ``bytes`` (:mod:`streams_app.live.wire`).
    """

    __slots__ = ("_wire", "entries")

    def __init__(self, entries: Sequence[LiveEntry]) -> None:
        self.entries = entries
        self._wire: list[bytes] | None = None

    def wire(self) -> list[bytes]:
        if self._wire is None:
            self._wire = [text_frame(entries_frame(chunk)) for chunk in chunks(self.entries, FRAME_MAX)]
        return self._wire
