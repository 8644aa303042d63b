"""The masker of one request: ``?unmasked=1`` asks to see masked values (see :mod:`streams_app.masking.apply`)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from streams_app import services
from streams_app.masking.apply import Masker, may_reveal

#: The query parameter of a reveal; its only accepted value is ``1``.
REVEAL_PARAM = "unmasked"


def request_masker(request: HttpRequest, conn: str, key: bytes) -> Masker:
    """Masks for everyone; reveals for a user of an unmasked role who asked (the view then calls
    :meth:`Masker.reveal_record` once its payloads are known). Anyone else asking gets a 403; both are
    audited by the gate (:func:`streams_app.services.payload_masker`)."""
    reveal = request.GET.get(REVEAL_PARAM) == "1"
    return services.payload_masker(user=request.user, conn=conn, key=key, reveal=reveal)


def masking_context(request: HttpRequest, masker: Masker, page_url: str) -> dict[str, Any]:
    """What a page says about masking: whether rules apply, and the link that reveals or hides. The
    links are made only where rules apply: the note that shows them shows nothing otherwise, and each
    copies the query string (a deep copy) on pages that mostly have no rule."""
    active = masker.active
    return {
        "masking": {
            "active": active,
            "revealing": masker.revealing,
            "can_reveal": active and may_reveal(request.user),
            "reveal_url": _with_reveal(page_url, request, reveal=True) if active else "",
            "hide_url": _with_reveal(page_url, request, reveal=False) if active else "",
        }
    }


def _with_reveal(url: str, request: HttpRequest, *, reveal: bool) -> str:
    """``url`` (built from the key's bytes, see :func:`links.with_query`) with the request's query, the
    reveal parameter set or dropped."""
    query = request.GET.copy()
    query.pop(REVEAL_PARAM, None)
    if reveal:
        query[REVEAL_PARAM] = "1"
    return url + (f"?{query.urlencode()}" if query else "")
