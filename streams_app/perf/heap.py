"""Keep CPython's cyclic garbage collector out of the hot paths: the web process's start-up heap, and
the bulk reads and writes that allocate millions of objects at once.

A full collection walks every object the collector tracks. In a web process most of them are the
loaded project (Django, the URLconf and every view module, the models, compiled templates) and they
live as long as the process does. Measured on the group page of 10k consumers (``bench/pages.py``),
the requests that happened to trigger a full collection took more than twice as long as the others,
and every page's p95 paid for them; with the start-up heap frozen both came down
(docs/performance.md#figures-behind-the-design).

``gc.freeze`` is the standard library's tool for this: what is alive moves to a permanent generation
that the collector does not walk. Reference counting still frees those objects; only a reference cycle
among them waits until the heap is unfrozen. The live tail freezes again as its websockets grow and
unfreezes when the last one closes (:class:`streams_app.live.hub.HeapFreezer`). After that, the next
tail's freeze covers the start-up heap again.

:func:`gc_paused` turns the collector off for a block that allocates objects by the million and keeps
them alive until it ends: a snapshot's or a mirror sync's replies and rows, an export's XRANGE replies.
The collector runs after every 700 new container objects (hiredis makes two lists per stream entry), and
each pass walks the young objects still alive; a full pass, triggered as they pile up, walks the whole
heap, which in a process with Django and the project loaded is over a hundred thousand objects.
Measured on the export's XRANGE pages of 20k entries (``bench/pipeline.py``'s entries) in a worker
process, parsing took about four times the CPU an entry with the collector on as with it paused, and
the whole export of a stream took much longer (docs/performance.md#figures-behind-the-design). A long
block may collect the cycles it made so far with ``gc.collect(0)``, which walks only the objects made
since the pause (the exporter does after each chunk it writes).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_startup() -> None:
    """Load the URLconf (and with it the views), collect, and freeze what is left: call once, at the end
    of the ASGI or WSGI module, before the first request."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imported now rather than on the first request
    gc.collect()
    gc.freeze()


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (and back as it was after).

    Reference counting still frees what the block drops; only reference cycles made in it wait, and
    they are collected after it, or earlier by an explicit ``gc.collect(0)`` (see the module docstring).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
