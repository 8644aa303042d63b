"""What the two exporters share: their counters, their callbacks, and the checkpoint of each source.

The streams exporter (:mod:`streams_app.lake.export`) and the snapshot-table exporter
(:mod:`streams_app.lake.tables`) land their files the same crash-safe way: the files about to be written
are listed in the checkpoint's ``pending`` first, so a run that died half-way has them deleted by the
next one (:func:`checkpoint_clear_pending`). Both count into one :class:`ExportStats`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from eventbus.text import display_text
from pipeline import lake
from streams_app.lake.models import ExportCheckpoint
from streams_app.metrics.models import name_hash

log = logging.getLogger(__name__)


@dataclass
class ExportStats:
    streams: int = 0
    entries: int = 0
    files: int = 0
    metrics: int = 0
    dead_letters: int = 0
    samples: int = 0
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


ProgressFn = Callable[[ExportStats], None]
WrittenFn = Callable[[list[str]], None]
"""Called with a chunk's files after they are written and before the checkpoint moves: the moment a
crash is most dangerous, which is what the tests simulate by raising there."""


def checkpoint_get(conn: str, kind: str, key: bytes) -> ExportCheckpoint:
    checkpoint, _ = ExportCheckpoint.objects.get_or_create(
        connection=conn, kind=kind, key_hash=name_hash(key),
        defaults={"key": key, "key_text": display_text(key)[:1000]},
    )
    return checkpoint


def checkpoint_clear_pending(target: lake.Lake, checkpoint: ExportCheckpoint) -> None:
    """Delete the files of a chunk that never reached its checkpoint (a crashed run)."""
    if not checkpoint.pending:
        return
    log.warning("export of %s: removing %d files of an unfinished chunk", checkpoint, len(checkpoint.pending))
    for path in checkpoint.pending:
        target.delete(path)
    checkpoint.pending = []
    checkpoint.save(update_fields=["pending", "updated_at"])
