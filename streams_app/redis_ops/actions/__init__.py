"""Write-side Redis access: the operations behind the operator buttons (docs/api.md#requeue-claim-and-replay).

Claim, ack, rewind, DLQ requeue / delete / purge, and replay. Each function validates its input,
talks to one monitored server through :func:`translated` (so only :class:`OpsError` escapes), and
returns frozen dataclasses. The callers (views, Celery jobs) add roles, audit rows and progress.

What makes these safe to press twice, from two browsers, or from a worker that gets killed:

* **claim** is XCLAIM with the operator's ``min_idle_ms``: an entry its consumer touched since the
  page loaded is not stolen. The outcome of every ID is read inside the same MULTI as the XCLAIM.
* **requeue** moves each dead letter inside a Lua script: still there? XADD to its stream + XDEL
  (``lua/requeue.lua`` for entries planned in Python; ``lua/requeue_rule.lua`` for the bulk path, which
  reads and rewrites a whole batch inside Redis). Two operators requeueing the same entry make one
  new entry; a re-run job finds moved entries gone.
* **replay** copies a batch and advances a Redis-side cursor in one script (``lua/replay.lua``), so a
  job resumed after a crash copies nothing twice, whatever progress its caller managed to save.
* **rewind** computes ENTRIESREAD so Redis keeps reporting the group's lag (docs/architecture.md#lag-redis-cannot-tell).

**Redis Cluster.** Scripts and MULTI see the keys of one hash slot only, so every call here is cut
by slot before it is sent and no user ever sees CROSSSLOT. Single-key scripts (purge, consumer
delete, the counts of previews) go through the cluster client, which routes them by their key; a
MULTI goes to the key's own primary (``client.key_client``). Work over two keys keeps its one-script
path when they share a slot (``{orders}:dlq`` and ``orders``, the event bus's naming) and otherwise
takes a stepwise path that is still never-lost and never-duplicated under a kill: a requeue across
slots leases, adds with a record in the target's slot, then deletes (:mod:`.moves`); a replay across
slots reads the batch in the client and adds it with its cursor and count in the target's slot
(:mod:`.replay`). The console's own keys (a replay's cursor, a requeue's leases and records) are
named with a ``{tag}`` of the slot they must share (:func:`._common.slot_twin`).

Layout: :mod:`.claims` (claim, autoclaim, ack), :mod:`.rewind`, :mod:`.dlq` (requeue, delete, purge;
listing a DLQ's entries is a read, :mod:`..reads.dlq`), :mod:`.moves` (requeue across slots),
:mod:`.requeue_run` (a bulk requeue's batches, pipelined across slots), :mod:`.replay`, :mod:`.admin`
(delete a consumer or a group, trim, delete entries: admin only) and
:mod:`._common` (constants, script loading, slots, validation). Callers keep using
``from streams_app.redis_ops import actions`` and ``actions.<name>``.
"""

from __future__ import annotations

from ._common import COUNT_BATCH as COUNT_BATCH
from ._common import MAX_AUTOCLAIM_COUNT as MAX_AUTOCLAIM_COUNT
from ._common import MAX_BATCH as MAX_BATCH
from ._common import MAX_IDS as MAX_IDS
from ._common import REPLAY_CURSOR_TTL_MS as REPLAY_CURSOR_TTL_MS
from ._common import ZERO_ID as ZERO_ID
from .admin import PENDING_AT_RISK_MAX as PENDING_AT_RISK_MAX
from .admin import (
    ConsumerDeleted,
    ConsumerPlan,
    EntriesDeleted,
    EntriesPlan,
    GroupDestroyed,
    GroupPending,
    PendingAtRisk,
    TrimPlan,
    TrimResult,
    consumer_delete,
    consumer_delete_preview,
    entries_delete,
    entries_delete_preview,
    group_destroy,
    trim,
    trim_preview,
)
from .claims import ClaimResult, ack, autoclaim, claim
from .dlq import EVENTBUS_SWITCH_FIELD as EVENTBUS_SWITCH_FIELD
from .dlq import (
    RequeueBatch,
    Requeued,
    RequeueFailure,
    RequeueResult,
    dlq_delete,
    dlq_purge,
    requeue,
    requeue_left,
    requeue_range,
)
from .replay import (
    ReplayBatch,
    ReplayCount,
    replay_copied,
    replay_count,
    replay_count_detail,
    replay_cursor,
    replay_range,
    resolve_range,
)
from .requeue_run import RequeueRun
from .rewind import RewindPlan, rewind, rewind_preview

__all__ = [
    "ClaimResult",
    "ConsumerDeleted",
    "ConsumerPlan",
    "EntriesDeleted",
    "EntriesPlan",
    "GroupDestroyed",
    "GroupPending",
    "PendingAtRisk",
    "ReplayBatch",
    "ReplayCount",
    "RequeueBatch",
    "RequeueFailure",
    "RequeueResult",
    "RequeueRun",
    "Requeued",
    "RewindPlan",
    "TrimPlan",
    "TrimResult",
    "ack",
    "autoclaim",
    "claim",
    "consumer_delete",
    "consumer_delete_preview",
    "dlq_delete",
    "dlq_purge",
    "entries_delete",
    "entries_delete_preview",
    "group_destroy",
    "replay_count",
    "replay_copied",
    "replay_count_detail",
    "replay_cursor",
    "replay_range",
    "requeue",
    "requeue_left",
    "requeue_range",
    "resolve_range",
    "rewind",
    "rewind_preview",
    "trim",
    "trim_preview",
]
