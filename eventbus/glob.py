"""Redis's glob, matched in Python exactly as ``SCAN ... MATCH`` matches it on the server.

The bus's command line filters keys where Redis cannot do it (configured DLQ patterns,
:mod:`eventbus.conventions`), and so may any program that reads the bus's keys (over a copy of the key
names, in rules it evaluates); a pattern must select the same keys there as the same pattern sent to
``SCAN MATCH``. This is the one copy, Django-free, for all of them.

This is a port of ``stringmatchlen`` (``util.c``), byte for byte, including its odd corners, each
checked against a real server by the tests:

* ``*`` any bytes, ``?`` one byte, ``\\x`` the byte ``x`` (inside classes too); a trailing ``\\`` is literal.
* ``[abc]``, ``[a-z]``, ``[^abc]``: only ``^`` negates (``[!a]`` is the class of ``!`` and ``a``); a
  reversed range (``[c-a]``) is swapped; ``]`` right after ``[`` (or ``[^``) closes an empty class; ``-``
  right before the closing ``]`` makes that ``]`` the range's end, leaving the class open; an unclosed
  class takes the rest of the pattern as its members.
* Ranges compare C ``char``s, which are signed on x86-64, the platform Redis servers commonly run
  on: ``[a-\\xff]`` is the range -1..97 there, so it holds 0xff and 0x00-0x61 but not 0x80-0xfe.
* A key is never empty for the matcher (its loop runs while bytes remain), except that ``SCAN`` skips
  matching altogether for the pattern ``*``: the empty key matches ``*`` and the empty pattern only.
* Redis gives up (no match) past 1000 nested ``*``: a pattern whose 1001st run of stars is not its end
  matches nothing.

Every byte string is a valid Redis glob, so nothing here raises on a pattern: a user's odd pattern is
answered, never refused. Matching is linear in practice: the pattern is cut at its runs of stars into
fixed-length segments, each a small compiled regex without repetition; the first is anchored at the
start, the last at the end, and the ones between are found leftmost-first (which is optimal for
fixed-length segments), so a pattern like ``*a*a*a*a*b`` cannot make a regex backtrack exponentially.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_STAR, _QUESTION, _OPEN, _CLOSE, _CARET, _DASH, _BACKSLASH = b"*?[]^-\\"
#: ``stringmatchlen`` returns "no match" when called this deep (one level per run of stars).
MAX_NESTING = 1000
_ALL_BYTES = frozenset(range(256))

#: One thing a pattern matches: a literal byte (int), a set of bytes (one byte of the key), or a run of
#: stars (None).
_Token = int | frozenset[int] | None


@dataclass(frozen=True, slots=True)
class _Segment:
    """A run of single-byte matchers between two runs of stars: a regex of fixed ``length``."""

    regex: re.Pattern[bytes]
    length: int


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled Redis glob; :func:`glob_compile` builds it, :meth:`matches` answers like ``SCAN MATCH``."""

    pattern: bytes
    segments: tuple[_Segment, ...]  # one without stars, else one more than the runs of stars
    literal_prefix: bytes  # every matching key starts with these bytes (a cheap pre-filter)
    never: bool  # too many nested stars: Redis matches nothing

    def matches(self, key: bytes | memoryview) -> bool:
        key = bytes(key)
        if not key:
            return self.pattern in (b"", b"*")
        if self.never:
            return False
        if len(self.segments) == 1:
            only = self.segments[0]
            return len(key) == only.length and only.regex.match(key) is not None
        head, *middle, tail = self.segments
        end = len(key) - tail.length
        if end < head.length or head.regex.match(key) is None or tail.regex.match(key, end) is None:
            return False
        pos = head.length
        for segment in middle:
            found = segment.regex.search(key, pos, end)
            if found is None:
                return False
            pos = found.end()
        return True


@functools.lru_cache(maxsize=512)
def glob_compile(pattern: bytes | str) -> Glob:
    """Compile a Redis glob (a ``str`` is taken as its UTF-8 bytes, as redis-py sends it to Redis)."""
    raw = pattern.encode() if isinstance(pattern, str) else bytes(pattern)
    tokens = _tokens(raw)
    runs = [i for i, token in enumerate(tokens) if token is None]
    # The run that Redis reaches at nesting depth 1001 stops every match, unless it ends the pattern
    # (a final "*" matches the rest of the key without going deeper).
    never = len(runs) > MAX_NESTING and runs[MAX_NESTING] != len(tokens) - 1
    bounds = [-1, *runs, len(tokens)]
    segments = tuple(_segment(tokens[a + 1 : b]) for a, b in zip(bounds, bounds[1:], strict=False))
    prefix = bytearray()
    for token in tokens:
        if not isinstance(token, int):
            break
        prefix.append(token)
    return Glob(pattern=raw, segments=segments, literal_prefix=bytes(prefix), never=never)


def glob_match(pattern: bytes | str, key: bytes) -> bool:
    """Whether Redis's ``SCAN MATCH pattern`` would return ``key``."""
    return glob_compile(pattern).matches(key)


def _tokens(pattern: bytes) -> list[_Token]:
    """The pattern as :data:`_Token` items, in ``stringmatchlen``'s order of checks."""
    out: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == _STAR:
            while i + 1 < n and pattern[i + 1] == _STAR:
                i += 1
            out.append(None)
        elif c == _QUESTION:
            out.append(_ALL_BYTES)
        elif c == _OPEN:
            i, members = _class(pattern, i + 1)
            out.append(members)
        else:
            if c == _BACKSLASH and i + 1 < n:  # a trailing backslash stands for itself
                i += 1
            out.append(pattern[i])
        i += 1
    return out


def _class(pattern: bytes, j: int) -> tuple[int, frozenset[int]]:
    """Parse a class from just after ``[``: the index of its last byte, and the key bytes it accepts."""
    n = len(pattern)
    negate = j < n and pattern[j] == _CARET
    if negate:
        j += 1
    members: set[int] = set()
    while True:
        if j < n and pattern[j] == _BACKSLASH and n - j >= 2:
            j += 1
            members.add(pattern[j])
        elif j < n and pattern[j] == _CLOSE:
            break
        elif j >= n:  # unclosed: the class ends with the pattern
            j = n - 1
            break
        elif n - j >= 3 and pattern[j + 1] == _DASH:
            low, high = sorted((_signed(pattern[j]), _signed(pattern[j + 2])))
            members.update(b for b in range(256) if low <= _signed(b) <= high)
            j += 2
        else:
            members.add(pattern[j])
        j += 1
    return j, frozenset(_ALL_BYTES - members if negate else members)


def _signed(byte: int) -> int:
    """The byte as a signed C ``char`` (x86-64), which is how Redis compares range ends."""
    return byte - 256 if byte >= 0x80 else byte


def _segment(tokens: list[_Token]) -> _Segment:
    parts = [
        re.escape(bytes((t,))) if isinstance(t, int) else _class_regex(t) for t in tokens if t is not None
    ]
    return _Segment(regex=re.compile(b"".join(parts), re.DOTALL), length=len(parts))


def _class_regex(members: frozenset[int]) -> bytes:
    """One key byte out of ``members``, as a regex (``(?!)`` for an empty class: it matches nothing)."""
    if not members:
        return b"(?!)"
    if members == _ALL_BYTES:
        return b"."
    spans: list[bytes] = []
    ordered = sorted(members)
    start = prev = ordered[0]
    for b in [*ordered[1:], None]:
        if b is not None and b == prev + 1:
            prev = b
            continue
        spans.append(b"\\x%02x" % start if start == prev else b"\\x%02x-\\x%02x" % (start, prev))
        if b is not None:
            start = prev = b
    return b"[" + b"".join(spans) + b"]"
