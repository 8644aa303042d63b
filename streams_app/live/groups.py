"""The one mapping from console objects to Channels group names (docs/architecture.md#the-channel-layer).

Channels allows only ASCII letters, digits, ``-``, ``_`` and ``.`` in a group name, under 100
characters, while stream keys are arbitrary bytes of any length. A readable part (the kind and the
parts with every other character replaced by ``_``, cut short) keeps names recognisable in
``redis-cli`` when debugging; a SHA-256 digest over the exact, length-prefixed parts keeps two
different keys that read alike (``a:b`` and ``a;b``, or two long keys sharing a prefix) in different
groups. Every group name in the console comes from :func:`group_name`; the helpers below only name
the kinds.
"""

from __future__ import annotations

import hashlib
import re

#: Channels' limit is "fewer than 100 characters".
MAX_LENGTH = 99
_DIGEST_CHARS = 24  # 96 bits: collisions are out of reach for any realistic number of keys
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]+")  # "." is kept out of parts: it separates them


def group_name(kind: str, *parts: str | bytes) -> str:
    """A valid, unique Channels group name for ``kind`` and ``parts`` (each text or bytes)."""
    raw = [p.encode("utf-8", "surrogateescape") if isinstance(p, str) else bytes(p) for p in (kind, *parts)]
    digest = hashlib.sha256(b"".join(b"%d:%s" % (len(p), p) for p in raw)).hexdigest()[:_DIGEST_CHARS]
    readable = [_NOT_ALLOWED.sub("_", p.decode("ascii", "replace")).strip("_") or "_" for p in raw]
    budget = MAX_LENGTH - len(digest) - 1
    text = ".".join(readable)[:budget].rstrip(".")
    return f"{text}.{digest}"


def stream_group(conn: str, key: bytes) -> str:
    """Open pages (tails) of one stream: operator actions and job progress about it go here."""
    return group_name("stream", conn, key)


def job_group(job_id: str | int) -> str:
    """Watchers of one background job."""
    return group_name("job", str(job_id))


def snapshot_group() -> str:
    """Pages showing charts: every committed metric snapshot is announced here."""
    return group_name("metrics", "snapshot")


def user_group(user_id: int | str) -> str:
    """Every open socket of one user: told to re-check its session and role when they may have changed."""
    return group_name("user", str(user_id))
