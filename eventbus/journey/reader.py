"""The journey's one door to Redis: every command it sends, counted, with the entries it read and the time.

A journey promises to be bounded like a search ("looked at N of M entries in K keys, in t ms"), so every
read goes through :class:`Reader`, which counts commands and entries, refuses to read past its entry
budget or its time budget, and masks every entry it hands out (``shown``, the caller's hook: a program
passes its masking rules, the command line alone shows the bytes as stored) before anything looks at it.

Replies are read in either shape redis-py may give them: raw (a client that keeps stream replies as Redis
sends them) or parsed (the bus's own client turns XRANGE into ``(id, dict)`` pairs and XINFO into dicts),
so any caller and ``python -m eventbus`` run this same code. Every command names one key
(or is a per-key pipeline), so a cluster client routes each to the key's node.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Fields = list[tuple[bytes, bytes]]
Shown = Callable[[bytes, str, Fields], Fields]
"""``(key, entry ID, fields) -> fields``: what the reader may see of an entry (see :mod:`eventbus.cli_reads`)."""

#: Entries per XRANGE page: big enough that round trips do not dominate, small enough to stop on time.
PAGE = 500


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def pairs(raw: Any) -> Fields:
    """An entry's fields in order: redis-py's parsed dict, or Redis's flat list."""
    if raw is None:
        return []
    items = list(raw.items()) if isinstance(raw, dict) else list(zip(raw[::2], raw[1::2], strict=False))
    if items and not (isinstance(items[0][0], bytes) and isinstance(items[0][1], bytes)):  # a decoding client
        return [(_bytes(k), _bytes(v)) for k, v in items]
    return items


def row(raw: Any) -> dict[str, Any]:
    """One XINFO row (a group) as a dict of text keys, from a parsed dict or a flat list."""
    items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=False)
    return {_text(k): v for k, v in items}


@dataclass
class Reader:
    """Counts and bounds a journey's reads (module docstring)."""

    client: Any
    budget: int
    deadline_ms: int
    shown: Shown | None = None
    commands: int = 0
    entries: int = 0
    started: float = field(default_factory=time.monotonic)
    #: every key looked at, with its length (entries, or members of a sorted set) when known
    keys: dict[bytes, int] = field(default_factory=dict)
    #: the distinct entries (key, ID) read: "looked at N of M" counts each once, however often it was read
    seen: set[tuple[bytes, str]] = field(default_factory=set)

    # ------------------------------------------------------------------------------ budgets

    @property
    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def left(self) -> int:
        """Entries this journey may still read (0 once its time is up)."""
        return 0 if self.elapsed_ms >= self.deadline_ms else max(0, self.budget - self.entries)

    # ------------------------------------------------------------------------------ commands

    def call(self, *command: Any) -> Any:
        self.commands += 1
        return self.client.execute_command(*command)

    def pipe(self, commands: Sequence[Sequence[Any]], **options: Any) -> list[Any]:
        """Several commands in one round trip (not a transaction: a cluster client splits it by node);
        a command Redis refuses comes back as its exception."""
        if not commands:
            return []
        self.commands += len(commands)
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command, **options)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        return replies

    def sizes(self, keys: Iterable[bytes]) -> dict[bytes, str]:
        """TYPE and size of each key in one round trip; remembers streams' and sorted sets' sizes."""
        keys = list(dict.fromkeys(keys))
        replies = self.pipe([c for k in keys for c in (("TYPE", k), ("XLEN", k), ("ZCARD", k))])
        types: dict[bytes, str] = {}
        for i, key in enumerate(keys):
            kind, xlen, zcard = replies[3 * i : 3 * i + 3]
            kind = "none" if isinstance(kind, Exception) else _text(kind)
            types[key] = kind
            if kind == "stream" and not isinstance(xlen, Exception):
                self.keys.setdefault(key, int(xlen))
            elif kind == "zset" and not isinstance(zcard, Exception):
                self.keys.setdefault(key, int(zcard))
        return types

    # ------------------------------------------------------------------------------ entries

    def _entries(self, key: bytes, raw: Any) -> list[tuple[str, Fields]]:
        shown, out = self.shown, []
        for entry_id, flat in raw or ():
            text_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            fields = pairs(flat)
            if shown is not None:
                fields = shown(key, text_id, fields)
            out.append((text_id, fields))
        self.seen.update((key, i) for i, _ in out)
        self.entries += len(out)
        return out

    def lookup(self, key: bytes, ids: Sequence[str]) -> dict[str, Fields]:
        """Entries of ``key`` by exact ID, in one round trip (an ID no longer there is left out)."""
        ids = list(dict.fromkeys(ids))
        replies = self.pipe([("XRANGE", key, i, i, "COUNT", 1) for i in ids])
        found: dict[str, Fields] = {}
        for reply in replies:
            if not isinstance(reply, Exception):
                found.update(self._entries(key, reply))
        return found

    def page(self, key: bytes, low: str, high: str, *, forward: bool, count: int = PAGE) -> list[tuple[str, Fields]]:
        """One page of a range (XRANGE/XREVRANGE bounds), at most what the budget leaves."""
        count = min(count, self.left())
        if count <= 0:
            return []
        if forward:
            raw = self.call("XRANGE", key, low, high, "COUNT", count)
        else:
            raw = self.call("XREVRANGE", key, high, low, "COUNT", count)
        return self._entries(key, raw)

    def scan(
        self,
        key: bytes,
        *,
        low: str = "-",
        high: str = "+",
        forward: bool = True,
        limit: int,
        keep: Callable[[str, Fields], bool],
        done: Callable[[], bool] = lambda: False,
        first_page: int = PAGE,
    ) -> tuple[list[tuple[str, Fields]], str | None, bool]:
        """Read ``key`` between ``low`` and ``high`` page by page, at most ``limit`` entries, keeping what
        ``keep`` accepts, until the range ends (``complete``) or ``done()`` says nothing more is wanted.

        Returns the kept entries, the last ID read (the cursor to continue from) and whether the range
        was read to its end (or ``done``). ``first_page``: a smaller first page, for a read that is likely to
        be done at once (a dead letter found right after the failure that filed it)."""
        kept: list[tuple[str, Fields]] = []
        read, last, size = 0, None, first_page
        while True:
            want = min(size, limit - read, self.left())
            size = PAGE
            if want <= 0:
                return kept, last, False
            page = self.page(key, low, high, forward=forward, count=want)
            for entry_id, fields in page:
                if keep(entry_id, fields):
                    kept.append((entry_id, fields))
            read += len(page)
            if page:
                last = page[-1][0]
                low, high = ("(" + last, high) if forward else (low, "(" + last)
            if len(page) < want or done():
                return kept, last, True

    def zscan(self, key: bytes, match: bytes, *, rounds: int) -> tuple[list[tuple[bytes, int]], bool]:
        """Members of a sorted set matching a glob (ZSCAN MATCH: Redis filters, only matches travel),
        at most ``rounds`` calls; returns (member, score) pairs and whether the scan ended."""
        cursor: Any = 0
        found: list[tuple[bytes, int]] = []
        for _ in range(rounds):
            reply = self.call("ZSCAN", key, cursor, "MATCH", match, "COUNT", 1000)
            cursor, items = reply[0], reply[1]
            if items and isinstance(items[0], list | tuple):
                found += [(_bytes(m), int(float(s))) for m, s in items]
            else:
                found += [(_bytes(items[i]), int(float(items[i + 1]))) for i in range(0, len(items), 2)]
            if int(cursor) == 0:
                break
        else:
            self._members(key, found)
            return found, False
        self._members(key, found)
        return found, True

    def _members(self, key: bytes, found: list[tuple[bytes, int]]) -> None:
        self.entries += len(found)
        self.seen.update((key, f"{score}:{len(member)}:{hash(member)}") for member, score in found)

    def groups(self, key: bytes) -> list[dict[str, Any]]:
        """XINFO GROUPS of a stream: name, last-delivered-id, pending (rows of text keys)."""
        return [row(g) for g in self.call("XINFO", "GROUPS", key)]

    def pending(self, key: bytes, pairs_: Sequence[tuple[bytes, str]]) -> list[tuple[bytes, int, int] | None]:
        """For each (group, entry ID): (consumer, idle ms, deliveries) when the group holds it pending."""
        # parse_detail: redis-py's parser of the extended form, when the client parses (the bus's does)
        replies = self.pipe([("XPENDING", key, g, i, i, 1) for g, i in pairs_], parse_detail=True)
        out: list[tuple[bytes, int, int] | None] = []
        for reply in replies:
            if isinstance(reply, Exception) or not reply:
                out.append(None)
                continue
            first = reply[0]
            if isinstance(first, dict):  # redis-py's parsed form
                out.append((_bytes(first["consumer"]), int(first["time_since_delivered"]),
                            int(first["times_delivered"])))  # fmt: skip
            else:
                out.append((_bytes(first[1]), int(first[2]), int(first[3])))
        return out

    def server_ms(self) -> int:
        seconds, micros = self.call("TIME")
        return int(seconds) * 1000 + int(micros) // 1000
