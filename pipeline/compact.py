"""Compaction: a partition's small files merged into few, swapped in whole so no reader sees half of it.

Every export run writes one file per stream, day and chunk (:mod:`streams_app.lake.export`), so a lake
exported every few minutes gathers hundreds of small files per day, and every Spark job pays for
each: a listing entry, a footer read, a slice of a task. :func:`compact` rewrites each partition
directory (``.../day=<YYYY-MM-DD>``) that holds more than one file as files of up to
:data:`TARGET_BYTES`, named after the ID ranges they hold like every file of the lake.

**Atomic, crash-safe.** The merged files are written into a hidden sibling directory
(``.compact-day=...``, which Spark and ``pyarrow.dataset`` skip, as they skip every name starting
with ``.`` or ``_``); then one ``renameat2(RENAME_EXCHANGE)`` swaps it with the partition directory,
and the old files, now in the hidden directory, are deleted. A reader lists either the old files or
the new ones, never a mix and never neither; a compaction killed at any point leaves the partition
as it was or as it will be, plus a hidden directory that the next compaction removes.

Only the ID-ranged datasets (entries, metrics, dead letters) are compacted, and only on a local file
system: an object store has no atomic rename of a directory (there a table format such as Delta Lake
or Iceberg is what makes a compaction atomic), so there :func:`compact` does nothing. A compaction
must not overlap an export or a Spark run over the same lake: the console runs it at the end of an
export, under the pipeline lock.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import posixpath
import shutil
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import lake as layout

#: The size of a merged file (Parquet bytes, as the inputs' sizes add up): big enough that a day of a
#: busy stream is a handful of files, small enough that one file is one task's work.
TARGET_BYTES = 128 * 2**20
DATASETS = (layout.ENTRIES, layout.METRICS, layout.DLQ)
STAGING = ".compact-"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100

StepFn = Callable[[str, str], None]
"""Called with (step, partition directory) after ``"staged"`` and after ``"swapped"``: where the tests
interrupt a compaction."""


@dataclass
class CompactStats:
    partitions: int = 0
    files_before: int = 0
    files_after: int = 0


class SwapUnsupported(OSError):
    """No atomic exchange of two directories here (not Linux, or a file system without it)."""


def _exchange(a: str, b: str) -> None:
    """Swap the directories ``a`` and ``b`` in one step (Linux ``renameat2`` with ``RENAME_EXCHANGE``)."""
    if not sys.platform.startswith("linux"):
        raise SwapUnsupported("atomic directory exchange needs Linux")
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if not hasattr(libc, "renameat2"):
        raise SwapUnsupported("this C library has no renameat2")
    if libc.renameat2(_AT_FDCWD, a.encode(), _AT_FDCWD, b.encode(), _RENAME_EXCHANGE) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), a)


def _first_id(name: str) -> tuple[int, int]:
    """The first entry ID of ``part-<first>_<last>.parquet`` as a sortable pair."""
    first = name[len("part-") :].split("_", 1)[0]
    ms, _, seq = first.partition("-")
    return int(ms), int(seq or 0)


def _partitions(root: str, dataset: str) -> list[str]:
    """Leaf directories (``day=...``) of ``dataset`` that are visible to readers."""
    out = []
    for directory, subdirs, _ in os.walk(os.path.join(root, dataset)):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "_")))
        if os.path.basename(directory).startswith("day="):
            out.append(directory)
    return out


def _groups(files: list[str]) -> list[list[str]]:
    """ID-ordered files cut into runs of about :data:`TARGET_BYTES` (a file bigger than that stays alone)."""
    groups: list[list[str]] = [[]]
    size = 0
    for path in files:
        nbytes = os.path.getsize(path)
        if groups[-1] and size + nbytes > TARGET_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(path)
        size += nbytes
    return groups


def compact(
    lake_uri: str,
    *,
    skip: Collection[str] = (),
    datasets: Collection[str] = DATASETS,
    on_step: StepFn | None = None,
) -> CompactStats:
    """Merge the small files of every partition of ``datasets``; ``skip`` holds lake-relative paths of
    files an unfinished export chunk may still delete (their partitions are left alone)."""
    stats = CompactStats()
    target = layout.Lake(lake_uri)
    if not target.local:
        return stats
    busy = {posixpath.dirname(target.path(path)) for path in skip}
    for dataset in datasets:
        for directory in _partitions(target.root, dataset):
            parent, name = os.path.split(directory)
            staging = os.path.join(parent, STAGING + name)
            if os.path.exists(staging):  # left by a compaction that was killed
                shutil.rmtree(staging)
            if directory in busy:
                continue
            files = sorted(
                (f for f in os.listdir(directory) if f.endswith(".parquet") and not f.startswith((".", "_"))),
                key=_first_id,
            )
            groups = _groups([os.path.join(directory, f) for f in files])
            if len(groups) == len(files):
                continue  # every file is one group already: nothing to merge
            _stage(staging, groups, layout.SCHEMAS[dataset])
            if on_step:
                on_step("staged", directory)
            _exchange(staging, directory)
            if on_step:
                on_step("swapped", directory)
            shutil.rmtree(staging)
            stats.partitions += 1
            stats.files_before += len(files)
            stats.files_after += len(groups)
    return stats


def _stage(staging: str, groups: list[list[str]], schema: pa.Schema) -> None:
    """Write each group as one file into ``staging`` (created empty), fsynced before the swap."""
    os.makedirs(staging)
    for group in groups:
        table = pa.concat_tables(pq.ParquetFile(path).read().cast(schema) for path in group)
        first = os.path.basename(group[0])[len("part-") :].split("_", 1)[0]
        last = os.path.basename(group[-1]).rsplit("_", 1)[1][: -len(".parquet")]
        path = os.path.join(staging, f"part-{first}_{last}.parquet")
        pq.write_table(table, path, **layout.parquet_options(schema.names))
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
