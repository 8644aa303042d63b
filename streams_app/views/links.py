"""URLs of console pages for byte-string stream keys and group names.

Keys are any bytes, so they travel as one percent-encoded path segment
(``quote(key, safe="")``, docs/api.md#ids-keys-and-times). Django's ``reverse()`` would quote the ``%`` of that
encoding a second time, so these builders make the URLs; :class:`BytesSegmentConverter` reads them.

A key may be longer than an HTTP request line may be: uvicorn refuses a target over 64 KiB, h11 a
request head over 16 KiB, nginx by default a request line over 8 KiB, each with a bare 400. A key
whose segment passes :data:`LONG_SEGMENT` is linked by its SHA-256 instead, as ``~sha256:<hex>``
(``quote(..., safe="")`` never leaves a ``:`` raw, so no key's own segment reads like that), and
:func:`long_key_middleware` puts the key back into the path before Django routes it. The key is found
from the digest in the console's cache, where building the link left it, or else in the metadata
mirror (a bookmark outlives the cache): both are single lookups, never a scan of Redis.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote_to_bytes, urlencode

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from streams_app.metrics.models import StreamMirror, name_hash
from streams_app.views.errors import not_found

log = logging.getLogger(__name__)

#: Key segments longer than this (characters, percent-encoded) are linked by digest. Far below every
#: server's limit, so a page link with a group name and a query string after the key still fits.
LONG_SEGMENT = 2048
DIGEST_PREFIX = "~sha256:"
#: How long the cache keeps a long key for its digest links; the mirror answers after that.
REMEMBER_S = 7 * 24 * 3600
#: Links are built many times per page: a digest remembered this recently is not written again.
_REWRITE_AFTER_S = 3600.0
_remembered: dict[str, float] = {}
_REMEMBERED_MAX = 4096

_DIGEST_SEGMENT = re.compile(rb"~sha256:([0-9a-f]{64})")
_PLAIN_ID = re.compile(r"[0-9]+-[0-9]+").fullmatch
_DIGEST_PATH = re.compile(
    r"(?P<head>(?:/api/v1)?/c/(?P<conn>[A-Za-z0-9_.-]+)/(?:streams|dlq)/)~sha256:(?P<digest>[0-9a-f]{64})"
    r"(?P<tail>/.*)?"
)


def segment(value: bytes | str) -> str:
    """One path segment holding ``value`` exactly (``/`` and ``%`` included)."""
    if isinstance(value, str):
        value = value.encode()
    return quote(value, safe="")


class BytesSegmentConverter:
    """``<seg:key>``: a percent-encoded path segment, handed to the view as the raw bytes."""

    regex = "[^/]+"

    def to_python(self, value: str) -> bytes:
        return unquote_to_bytes(value)

    def to_url(self, value: bytes | str) -> str:
        return segment(value)


class ConnConverter:
    regex = "[A-Za-z0-9_.-]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class EntryIdConverter:
    """``<eid:entry_id>``: a full stream entry ID (``ms-seq``), handed to the view as text."""

    regex = r"[0-9]{1,20}-[0-9]{1,20}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


def key_segment(key: bytes) -> str:
    """The path segment of a stream key in a link: :func:`segment`, or ``~sha256:<hex>`` when too long."""
    plain = segment(key)
    if len(plain) <= LONG_SEGMENT:
        return plain
    digest = name_hash(key)
    _remember(digest, bytes(key))
    return DIGEST_PREFIX + digest


def _cache_key(digest: str) -> str:
    return f"console:long-key:{digest}"


def _remember(digest: str, key: bytes) -> None:
    now = time.monotonic()
    if now - _remembered.get(digest, -_REWRITE_AFTER_S) < _REWRITE_AFTER_S:
        return
    try:
        cache.set(_cache_key(digest), key, REMEMBER_S)
    except Exception:  # noqa: BLE001 - the console's Redis is down: the link still works once mirrored
        log.warning("could not remember the long key of digest %s", digest, exc_info=True)
        return
    if len(_remembered) >= _REMEMBERED_MAX:
        _remembered.clear()
    _remembered[digest] = now


def key_for_digest(conn: str, digest: str) -> bytes | None:
    """The stream key whose SHA-256 is ``digest``, if the cache or ``conn``'s mirror knows it."""
    try:
        key = cache.get(_cache_key(digest))
    except Exception:  # noqa: BLE001 - fall back on the mirror
        log.warning("could not read the long key of digest %s", digest, exc_info=True)
        key = None
    if isinstance(key, bytes) and name_hash(key) == digest:
        return key
    row = StreamMirror.objects.filter(connection=conn, key_hash=digest).values_list("key", flat=True).first()
    return bytes(row) if row is not None else None


def resolve_key(conn: str, key: bytes) -> bytes:
    """``key`` as a route read it, or the key a ``~sha256:<hex>`` segment stands for.

    For routes outside Django's URL resolution (the live tail's websocket), after authentication; a
    digest nobody knows stays as it is (and names no stream).
    """
    match = _DIGEST_SEGMENT.fullmatch(key)
    if match is None:
        return key
    return key_for_digest(conn, match.group(1).decode("ascii")) or key


def long_key_middleware(get_response: Callable[[HttpRequest], HttpResponse]):
    """Route a ``~sha256:<hex>`` link as if it held the whole key (see the module docstring).

    Only for a signed-in user: anyone else is sent to log in by the short address. ``request.path``
    keeps the short form, so login redirects and "this page" links stay short too.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        match = _DIGEST_PATH.fullmatch(request.path_info)
        if match is not None and request.user.is_authenticated:
            key = key_for_digest(match["conn"], match["digest"])
            if key is None:
                return not_found(
                    request,
                    "This link names a stream by the digest of its key, a key too long for a URL, and the "
                    "console does not know that key (yet): open it from the streams list, or wait for the "
                    "next metadata sync.",
                )
            request.path_info = match["head"] + segment(key) + (match["tail"] or "")
        return get_response(request)

    return middleware


def with_query(url: str, request: HttpRequest) -> str:
    """``url`` (built from a key's bytes) with the request's query string: the address of the page being
    shown, for its own refresh and the actions that come back to it. ``request.get_full_path()`` is
    built from the decoded path, which loses a key's ``/`` and its non-UTF-8 bytes."""
    return url + (f"?{request.GET.urlencode()}" if request.GET else "")


def stream_url(conn: str, key: bytes) -> str:
    return f"/c/{conn}/streams/{key_segment(key)}/"


def group_url(conn: str, key: bytes, group: bytes) -> str:
    return f"{stream_url(conn, key)}groups/{segment(group)}/"


def entry_url(conn: str, key: bytes, entry_id: str) -> str:
    return entry_urls(conn, key)(entry_id)


def entry_urls(conn: str, key: bytes) -> Callable[[str], str]:
    """:func:`entry_url` for the entries of one stream: a page of 50 rows encodes the key once, not 50 times."""
    head = f"{stream_url(conn, key)}entries/"
    return lambda entry_id: f"{head}{entry_id}/"


def raw_field_url(conn: str, key: bytes, entry_id: str, index: int) -> str:
    return f"{entry_url(conn, key, entry_id)}raw/?field={index}"


def api_stream_url(conn: str, key: bytes) -> str:
    return f"/api/v1/c/{conn}/streams/{key_segment(key)}/"


def dlq_url(conn: str, key: bytes) -> str:
    return f"/c/{conn}/dlq/{key_segment(key)}/"


def api_dlq_url(conn: str, key: bytes) -> str:
    return f"/api/v1/c/{conn}/dlq/{key_segment(key)}/"


def dlq_entry_url(conn: str, key: bytes, entry_id: str) -> str:
    """One dead letter's own page: its parsed error, origin and payload, with its buttons."""
    return f"{dlq_url(conn, key)}entries/{entry_id}/"


def journey_url(conn: str, key: bytes, entry_id: str) -> str:
    """The journey of the event an entry belongs to (``/c/<conn>/journey/?q=<id>&stream=<key>``)."""
    return journey_urls(conn, key)(entry_id)


def journey_urls(conn: str, key: bytes) -> Callable[[str], str]:
    """:func:`journey_url` for the entries of one stream, the key encoded once: what
    ``urlencode({"q": entry_id, "stream": key})`` gives, its two pairs built apart."""
    head, tail = f"/c/{conn}/journey/?q=", "&" + urlencode({"stream": key.decode("utf-8", "replace")})
    # An entry ID as Redis gives it (digits and a dash) is its own encoding.
    return lambda entry_id: f"{head}{entry_id if _PLAIN_ID(entry_id) else quote_plus(entry_id)}{tail}"


def job_url(job_id: int) -> str:
    return f"/jobs/{int(job_id)}/"
