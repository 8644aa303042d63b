"""Page sizes and the argument checks every read shares."""

from __future__ import annotations

from ..errors import InvalidArgument

MAX_PAGE = 1000
DEFAULT_PAGE = 50


def check_count(count: int) -> int:
    if count < 1:
        raise InvalidArgument("count must be at least 1.")
    return min(count, MAX_PAGE)


def validate_key(key: bytes) -> bytes:
    if not isinstance(key, bytes) or not key:
        raise InvalidArgument("A stream key is required.")
    return key
