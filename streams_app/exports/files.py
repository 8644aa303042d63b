"""Background exports: the job body that writes a range to a file, the file it leaves, and its expiry.

**Resumable.** The job writes its range in parts under ``<BUSCONSOLE_EXPORT_DIR>/job-<id>/``: each part
holds :data:`PART_PAGES` pages, is written to a ``.tmp`` file and renamed into place, and only then is
the job's cursor (the last ID the part read) saved with the number of parts. A run that starts after
a killed one deletes the parts past the saved count (and any ``.tmp``) and reads on from the saved
cursor, so no entry is written twice or lost. When the range is read, the parts are joined into
``export-<id>.<ext>`` (CSV's header first; Parquet's row groups copied one at a time into one file),
renamed into place, and the parts removed. A run after that finds the file and ends.

**A cancel stops it within a second.** A part may take long when a search query is costly, so the job
looks at its cancel flag before every entry it tests (:meth:`~streams_app.jobs.runner.Progress.check`,
which reads the job's state at most every half second) and saves its count between pages; a cancelled
run leaves its unfinished part as a ``.tmp`` file, which a resume deletes.

**Same rows as a download.** The parts are encoded by the same encoders, from the same pages (the same
page size from the same first ID), as the streamed download; CSV takes its columns from the first page
read, saved in the job's progress before the first part, so a resumed job keeps them.

**Entries too costly to evaluate.** An entry whose own data makes the query too costly is not handed
to CEL and not written (:attr:`eventbus.search.query.Query.too_costly`); the job counts them in its
progress (``too_costly``) with the other counts, so a part a resumed run writes again is counted once,
and its note (the page, the API's ``error``, the finishing audit row) says how many were left out.

**Expiry.** Files and part directories older than ``BUSCONSOLE_EXPORT_RETENTION_H`` hours are deleted
when any export job runs (:func:`exports_expire`); a download of an expired file is a 404 that says so.
"""

from __future__ import annotations

import gc
import itertools
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
from django.conf import settings

from eventbus.text import display_text
from streams_app.exports.formats import PARQUET_SCHEMA, CsvEncoder, columns_of, encoder_for
from streams_app.exports.reader import PAGE, Matches, Tally, encoded_pages, export_matcher
from streams_app.jobs.models import Job
from streams_app.jobs.runner import KIND_EXPORT, Progress
from streams_app.masking.apply import search_mask
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import actions
from streams_app.redis_ops.ranges import range_entry_pages
from streams_app.redis_ops.types import Entry

#: Pages per part file: how much work a killed job may have to redo.
PART_PAGES = 10
EXTENSIONS = {"ndjson": "ndjson", "csv": "csv", "parquet": "parquet"}


def export_dir() -> Path:
    path = Path(settings.BUSCONSOLE_EXPORT_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _final_path(job: Job) -> Path:
    return export_dir() / f"export-{job.pk}.{EXTENSIONS[job.parameters['format']]}"


def download_name(key: bytes, fmt: str) -> str:
    """A safe file name for the browser: the key's text with anything unusual as ``_``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", display_text(key)).strip("._")[:80] or "stream"
    return f"{stem}.{EXTENSIONS[fmt]}"


def export_file(job: Job) -> Path | None:
    """The finished file of an export job, or None (not an export, not done, or expired)."""
    if job.kind != KIND_EXPORT or job.state != Job.State.DONE:
        return None
    name = (job.progress or {}).get("file")
    path = export_dir() / name if name else None
    return path if path is not None and path.is_file() else None


def exports_expire(*, now: float | None = None) -> int:
    """Delete export files and part directories older than the retention; how many went."""
    limit = (now if now is not None else time.time()) - settings.BUSCONSOLE_EXPORT_RETENTION_H * 3600
    removed = 0
    for path in export_dir().iterdir():
        if not path.name.startswith(("export-", "job-")):
            continue
        try:
            if path.stat().st_mtime >= limit:
                continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
        except FileNotFoundError:  # another worker's sweep got there first
            continue
    return removed


def _part(workdir: Path, index: int, ext: str) -> Path:
    return workdir / f"part-{index:06d}.{ext}"


def _drop_unsaved(workdir: Path, parts: int) -> None:
    """Remove what a killed run wrote past its last save: ``.tmp`` files and parts not counted."""
    for path in workdir.iterdir():
        index = path.name.removeprefix("part-").split(".")[0]
        if path.suffix == ".tmp" or not index.isdigit() or int(index) >= parts:
            path.unlink()


def export_job_run(job: Job, progress: Progress) -> None:
    """Write the job's range to its file, part by part (see the module docstring).

    With the cyclic collector paused (:mod:`streams_app.perf.heap`): a part is ten thousand entries alive at
    once, each a few objects, which the collector would walk again and again. Measured over 300k entries
    in a process with the console loaded, every format wrote faster paused
    (docs/performance.md#figures-behind-the-design). The cycles a part made, if any, are collected after it.
    """
    with gc_paused():
        _export_job_run(job, progress)


def _export_job_run(job: Job, progress: Progress) -> None:
    exports_expire()
    params = job.parameters
    conn, key, fmt = job.connection, bytes.fromhex(params["key"]), params["format"]
    ext = EXTENSIONS[fmt]
    state = dict(job.progress or {})
    final = _final_path(job)
    if state.get("file") and final.is_file():
        return
    predicate = export_matcher(params.get("q") or None, dlq=bool(params.get("dlq")))
    # The bar counts entries read of the range (a lower bound past a million entries).
    total = (
        job.total
        if job.total is not None
        else actions.replay_count(conn, key, start=params["start"], end=params["end"])
    )
    workdir = export_dir() / f"job-{job.pk}"
    workdir.mkdir(exist_ok=True)
    parts = int(state.get("parts", 0))
    _drop_unsaved(workdir, parts)
    tally = Tally(scanned=int(state.get("scanned", 0)), written=int(state.get("written", 0)))
    costly_before = int(state.get("too_costly", 0))  # what the saved parts left out; this run counts on

    def costly() -> int:
        return costly_before + (predicate.too_costly if predicate is not None else 0)
    cursor = state.get("cursor")
    start = params["start"] if cursor is None else "(" + cursor
    # masked as its creator sees the stream, before the search and the columns see it: a job never reveals
    pages = range_entry_pages(
        conn, key, start=start, end=params["end"], page=int(params.get("page", PAGE)),
        mask=search_mask(job.created_by, conn, key),
    )
    columns = [bytes.fromhex(c) for c in state["columns"]] if "columns" in state else None
    if columns is None:
        first = next(pages, [])
        columns = columns_of(first)
        pages = itertools.chain([first] if first else [], pages)

    # What the parts on disk hold: the cursor and counts a resumed run starts from. ``done`` moves on
    # inside a part (the page's bar); the saved state moves only when a part is in place.
    def counted() -> dict[str, int]:
        return {"scanned": tally.scanned, "written": tally.written, "too_costly": costly()}

    on_disk = counted()

    def saved_state(**finished: object) -> dict[str, object]:
        """The job's saved progress: where the parts on disk end, and (once joined) the file."""
        return {"cursor": cursor, "parts": parts, **on_disk, "columns": [c.hex() for c in columns],
                "format": fmt, **finished}

    def save(*, force: bool = False) -> None:
        progress.save(done=tally.scanned, total=total, force=force, progress=saved_state())

    def watched(chunk: list[list[Entry]]) -> Iterator[list[Entry]]:
        for page in chunk:
            save()  # at most every SAVE_EVERY_S; raises once the job was cancelled
            yield page

    save(force=True)
    checked = _checked(predicate, progress)
    while True:
        chunk = list(itertools.islice(pages, PART_PAGES))
        if not chunk:
            break
        encoder = encoder_for(fmt, [], header=False)
        if fmt == "csv":
            encoder = CsvEncoder(columns, header=False)
        tmp = _part(workdir, parts, ext + ".tmp")
        with tmp.open("wb") as out:
            for data in encoded_pages(watched(chunk), fmt=fmt, matches=checked, tally=tally, encoder=encoder):
                out.write(data)
        os.replace(tmp, _part(workdir, parts, ext))
        parts += 1
        cursor = chunk[-1][-1].id
        on_disk = counted()
        save(force=True)
        gc.collect(0)
    _join(workdir, parts, ext, fmt, columns, final, check=progress.check)
    on_disk = counted()
    progress.save(
        done=tally.written, total=tally.written, force=True,
        progress=saved_state(file=final.name, size=final.stat().st_size),
    )
    shutil.rmtree(workdir, ignore_errors=True)
    if left_out := costly():
        progress.note(
            f"{left_out} entr{'y' if left_out == 1 else 'ies'} too costly to evaluate (their data makes the "
            "expression too costly) were not exported."
        )


def _checked(matches: Matches | None, progress: Progress) -> Matches | None:
    """``matches`` that looks at the job's cancel flag before each entry (every CHECK_EVERY_S, in fact).

    A query may cost milliseconds an entry, and a part holds ten thousand: checked only between
    parts, a cancelled export held its worker for minutes. Without a query a page takes
    milliseconds, and the check between pages (``save``) is enough.
    """
    if matches is None:
        return None
    check = progress.check

    def checked(entry: Entry) -> bool:
        check()
        return matches(entry)

    return checked


def _join(
    workdir: Path, parts: int, ext: str, fmt: str, columns: list[bytes], final: Path, *, check: Callable[[], None]
) -> None:
    """Join the parts into ``final`` (written aside, then renamed: a killed join leaves no half file)."""
    tmp = final.with_name(final.name + ".tmp")
    with tmp.open("wb") as out:
        if fmt == "parquet":
            writer = pq.ParquetWriter(out, PARQUET_SCHEMA, compression="zstd")
            for index in range(parts):
                check()
                part = pq.ParquetFile(_part(workdir, index, ext))
                for group in range(part.num_row_groups):  # one row group (one page) in memory at a time
                    writer.write_table(part.read_row_group(group))
            writer.close()
        else:
            if fmt == "csv":
                out.write(CsvEncoder(columns).start())
            for index in range(parts):
                check()
                with _part(workdir, index, ext).open("rb") as part_file:
                    shutil.copyfileobj(part_file, out)
    os.replace(tmp, final)
