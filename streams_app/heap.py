"""Keep what a web process holds for its whole life out of CPython's full garbage collections.

A full collection walks every object the collector tracks. In a web process most of them are the
loaded project (Django, the URLconf and every view module, the models, compiled templates) and they
live as long as the process does. Measured on the group page of 10k consumers (``bench/pages.py``),
the requests that happened to trigger a full collection took 126-146 ms at the median against 54 ms,
and every page's p95 sat near 150 ms. With the start-up heap frozen it was 60-69 ms, p95 72-106 ms.

``gc.freeze`` is the standard library's tool for this: what is alive moves to a permanent generation
that the collector does not walk. Reference counting still frees those objects; only a reference cycle
among them waits until the heap is unfrozen. The live tail freezes again as its websockets grow and
unfreezes when the last one closes (:class:`streams_app.live.hub.HeapFreezer`). After that, the next
tail's freeze covers the start-up heap again.
"""

from __future__ import annotations

import gc


def freeze_startup() -> None:
    """Load the URLconf (and with it the views), collect, and freeze what is left: call once, at the end
    of the ASGI or WSGI module, before the first request."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imported now rather than on the first request
    gc.collect()
    gc.freeze()
