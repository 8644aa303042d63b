"""What a saved view may point at: a page of this console, never another site.

A view's link is shown to other users (when shared) and followed by a click, so the URL given when
saving is checked here, once, before it is stored: it must be a path on this site (``/...``, not
``https://...``, ``//host``, ``/\\host``, ``javascript:``; no backslash or control character
anywhere, since browsers read ``/\\host`` as ``//host``), and that path must resolve to one of the
console's pages (:data:`SAVEABLE_PAGES`) rather than an action, an API call or the login page. The
path keeps its percent-encoding exactly as the browser had it, so a binary stream key's page
round-trips; a view whose stream was deleted since still resolves, and opening it shows the page's
own 404.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import quote, urlsplit

from django.urls import Resolver404, resolve

from streams_app.redis_ops.errors import InvalidArgument
from streams_app.saved.models import PATH_MAX, QUERY_MAX

#: URL names of the pages a view may open: the screens that read, with their filters in the query.
SAVEABLE_PAGES: frozenset[str] = frozenset(
    {
        "overview",
        "streams",
        "stream",
        "entry",
        "group",
        "dlq-list",
        "dlq",
        "dlq-entry",
        "retries-list",
        "retries",
        "tail",
        "jobs",
        "job",
        "audit",
        "alerts",
        "reports",
    }
)

# Characters kept as they are when a path or query is made ASCII; ``%`` keeps existing escapes.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


class Target(NamedTuple):
    """A checked page address: ``path`` (percent-encoded, from ``/``) and ``query`` (without ``?``)."""

    path: str
    query: str


def target_parse(url: object) -> Target:
    """``url`` as a saved view stores it, or InvalidArgument (a 400) saying why it is refused.

    The fragment is dropped (the server never sees it); non-ASCII characters are percent-encoded
    as a browser would send them.
    """
    if not isinstance(url, str) or not url:
        raise InvalidArgument("Give the page to save as a path of this console, e.g. /c/default/streams/.")
    if len(url) > PATH_MAX + QUERY_MAX + 1:
        raise InvalidArgument(f"The address is over {PATH_MAX + QUERY_MAX} characters: too long to save.")
    if any(ch == "\\" or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InvalidArgument("The address holds a backslash or a control character: not a console page.")
    if not url.startswith("/") or url.startswith("//"):
        raise InvalidArgument(
            "Only a page of this console can be saved: give its path, starting with a single '/' "
            "(not a full or external URL)."
        )
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        raise InvalidArgument("Only a page of this console can be saved, not an external URL.")
    path = quote(parts.path, safe=_PATH_SAFE)
    query = quote(parts.query, safe=_QUERY_SAFE)
    if len(path) > PATH_MAX or len(query) > QUERY_MAX:
        raise InvalidArgument(f"The path is over {PATH_MAX} or the query over {QUERY_MAX} characters.")
    try:
        match = resolve(path)
    except Resolver404:
        raise InvalidArgument(f"{path[:200]} is not a page of this console.") from None
    if match.url_name not in SAVEABLE_PAGES:
        raise InvalidArgument(
            f"{path[:200]} is not a page that can be saved as a view (an action, an API call or "
            "a settings page): save the page that shows the data."
        )
    return Target(path, query)
