"""Shared by the action modules: constants, Lua script loading, the reads several actions begin with,
and input validation.

The scripts stay in ``streams_app/redis_ops/lua/`` and are registered once per client (EVALSHA,
reloaded on NOSCRIPT); on a cluster the client sends each call to the node owning its keys' slot, so
every script call here declares keys of one slot only (:func:`slot_twin` names the console's own keys
to share a stream's slot). The validators raise :class:`InvalidArgument` before anything reaches Redis;
a missing stream is :class:`NotFound` (:func:`..commands.require_stream`, shared with :mod:`..reads`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from eventbus import scripts as bus_scripts
from eventbus.connection import SyncClient

from ..client import key_client
from ..commands import stream_pipeline
from ..errors import InvalidArgument
from ..ids import StreamId, parse_id
from ..parsers import parse_stream, reply_text
from ..types import StreamInfo

MAX_IDS = 1000
"""IDs one claim / ack / requeue / delete call accepts: one page of a selection, one bounded MULTI."""
MAX_AUTOCLAIM_COUNT = 1000
MAX_BATCH = 2000
"""Upper bound for every batch size (larger requests are served in batches of this size): a bulk
requeue script moving 2,000 dead letters keeps Redis busy for about 14 ms, and other clients wait."""
COUNT_BATCH = 2000
"""Entries counted per Lua call by previews (only two integers travel back). A call costs Redis
about 6 ms for 2,000 entries of a dozen fields (measured: 29 ms for 10,000), so other clients wait
at most that long."""
REPLAY_CURSOR_TTL_MS = 7 * 24 * 3600 * 1000
"""How long a replay job's Redis-side cursor outlives its last batch."""
ZERO_ID = "0-0"


# ---------------------------------------------------------------- scripts


_SCRIPT_NAMES = (
    "requeue", "requeue_rule", "count_range", "purge", "replay", "replay_copy", "consumer_delete", "walk",
    "retry_take",
)
_scripts: weakref.WeakKeyDictionary[SyncClient, dict[str, Script]] = weakref.WeakKeyDictionary()
_scripts_lock = threading.Lock()


#: Redis scripts cannot load one another: the shared functions (``lua/holds_all.lua``, the field filter;
#: ``lua/add_copy.lua``, a replayed copy and the ID order; the bus's ``add_then_remove``, a move into a
#: stream that removes nothing without a copy, and ``hset_many``) are prepended to the scripts that call them.
_PRELUDES = {
    "count_range": ("holds_all",),
    "replay": ("holds_all", "add_copy"),
    "replay_copy": ("holds_all", "add_copy"),
    "requeue_rule": ("hset_many",),
    "retry_take": ("add_then_remove",),
}


#: Scripts the bus's command line runs too: their one copy, preludes included, is eventbus.scripts'.
_BUS_SCRIPTS = frozenset({"requeue"})
#: Preludes the console's scripts share with the bus's: their one copy is in eventbus/lua/.
_BUS_PRELUDES = frozenset({"add_then_remove", "hset_many"})


def _lua(name: str) -> str:
    if name in _BUS_PRELUDES:
        return bus_scripts.lua(name)
    # The scripts live in redis_ops/lua/, one level above this package.
    return resources.files("streams_app.redis_ops").joinpath("lua", f"{name}.lua").read_text()


def _source(name: str) -> str:
    if name in _BUS_SCRIPTS:
        return bus_scripts.source(name)
    return "".join(_lua(prelude) for prelude in _PRELUDES.get(name, ())) + _lua(name)


#: Scripts that only read (counts and walks for previews and dry runs): run with EVALSHA_RO, so that a
#: read-only ACL user (key permissions ``%R~``) may run them, and Redis itself refuses any write from them.
#: EVALSHA declares its keys read-write: a user allowed it may write any key it may name.
_READ_ONLY_SCRIPTS = frozenset({"count_range", "walk"})


class ReadOnlyScript:
    """A registered script run with ``EVALSHA_RO`` (Redis 7.0+), loaded again on NOSCRIPT.

    A server without the command (Redis 6.2) runs it with EVALSHA, as redis-py's Script does.
    """

    def __init__(self, script: Script) -> None:
        self.script = script

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:  # a Lua reply, any shape
        client, sha = self.script.registered_client, self.script.sha
        try:
            return client.execute_command("EVALSHA_RO", sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
        except redis.exceptions.NoScriptError:
            client.script_load(self.script.script)
            return client.execute_command("EVALSHA_RO", sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
        except redis.ResponseError as exc:
            if "unknown command" not in str(exc):
                raise
            return self.script(keys=keys, args=args)


def _script(client: SyncClient, name: str) -> Script | ReadOnlyScript:
    """The script ``name`` registered on ``client``, once per client (EVALSHA, reloaded on NOSCRIPT;
    EVALSHA_RO for :data:`_READ_ONLY_SCRIPTS`)."""
    scripts = _scripts.get(client)
    if scripts is None:
        with _scripts_lock:
            scripts = _scripts.get(client)
            if scripts is None:
                scripts = {n: client.register_script(_source(n)) for n in _SCRIPT_NAMES}
                _scripts[client] = scripts
    return ReadOnlyScript(scripts[name]) if name in _READ_ONLY_SCRIPTS else scripts[name]


def _count(client: SyncClient, key: bytes, start: str, end: str, match: Sequence[bytes] = ()) -> int:
    """Entries in [start, end] (``start`` may be exclusive), counted inside Redis in bounded batches."""
    script = _script(client, "count_range")
    total = 0
    while True:
        read, matched, last = script(keys=[key], args=[start, end, COUNT_BATCH, *match])
        total += int(matched)
        if int(read) < COUNT_BATCH or not last:
            return total
        start = "(" + reply_text(last)


# ---------------------------------------------------------------- reads


def _stream_snapshot(conn: str, client: SyncClient, key: bytes) -> StreamInfo:
    """XINFO STREAM and XINFO GROUPS of one stream, read in one MULTI (on the key's node on a cluster).

    The previews compare the stream's counters with its groups (a rewind's ENTRIESREAD, a trim's
    pending warning): read apart, an XADD or a group's read in between would make them disagree.
    TYPE rides along so a missing key or another type is NotFound, worded as everywhere else.
    """
    info, groups = stream_pipeline(
        conn, key_client(conn, key), key, [("XINFO", "STREAM", key), ("XINFO", "GROUPS", key)], transaction=True
    )
    return parse_stream(key, info, groups)


# ---------------------------------------------------------------- validation


def _key(key: bytes, what: str = "stream key") -> bytes:
    if not isinstance(key, bytes) or not key:
        raise InvalidArgument(f"A {what} is required.")
    return key


def _name(value: bytes, what: str) -> bytes:
    if not isinstance(value, bytes) or not value:
        raise InvalidArgument(f"A {what} name is required.")
    return value


def _ids(ids: Sequence[str], *, limit: int = MAX_IDS) -> list[str]:
    """Validated, normalised (``ms-seq``), de-duplicated IDs in their given order."""
    if isinstance(ids, str | bytes):
        raise InvalidArgument("ids must be a list of entry IDs.")
    out: list[str] = []
    seen: set[str] = set()
    for value in ids:
        if not isinstance(value, str):
            raise InvalidArgument("Entry IDs must be text like 1700000000000-0.")
        sid = str(parse_id(value, allow_bare=False, what="entry ID"))
        if sid not in seen:
            seen.add(sid)
            out.append(sid)
    if not out:
        raise InvalidArgument("No entry IDs given.")
    if len(out) > limit:
        raise InvalidArgument(f"At most {limit} entry IDs per call ({len(out)} given).")
    return out


def _non_negative(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{what} must be a whole number, 0 or more.")
    return value


def _positive(value: int, what: str, *, cap: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{what} must be a whole number, 1 or more.")
    return min(value, cap) if cap else value


def _match_args(match: Mapping[bytes, bytes] | None) -> list[bytes]:
    args: list[bytes] = []
    for name, value in (match or {}).items():
        if not isinstance(name, bytes) or not isinstance(value, bytes) or not name:
            raise InvalidArgument("A field filter maps field names to values, both bytes.")
        args += (name, value)
    return args


def _sid(value: str) -> StreamId:
    return parse_id(value, allow_bare=False)
