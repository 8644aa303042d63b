"""The event bus's delayed retries: list them, and retry now, move to the DLQ or delete waiting ones.

Each action runs under the one role-and-audit path (:func:`.audit.action_audit`): ``retry.now`` and
``retry.dead_letter`` need an operator, ``retry.delete`` an admin, and their ``.count`` previews (what
"all" would take, shown before it is done) the same role. Selected retries are named by their refs;
"all" is bounded by ``up_to_ms``, the latest due time the operator saw, so retries scheduled later are
left for the bus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.conf import settings

from eventbus.text import display_text
from streams_app.redis_ops import retries as retry_reads
from streams_app.redis_ops.actions import retries as retry_actions
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

#: The action of each mode of :func:`retry_act`, as ACTION_ROLES and the audit page name it.
ACTIONS = {"stream": "retry.now", "dlq": "retry.dead_letter", "delete": "retry.delete"}


def retry_list(*, conn: str, budget: int | None = None) -> retry_reads.RetryListing:
    """Every retry set of ``conn`` (both namings), found by a bounded SCAN of sorted sets."""
    return retry_reads.retry_sets(conn, budget=budget or settings.BUSCONSOLE_SCAN_BUDGET)


def _action(mode: str) -> str:
    action = ACTIONS.get(mode)
    if action is None:
        raise InvalidArgument(f"mode must be one of {', '.join(ACTIONS)}.")
    return action


def _note(user: UserLike | None, rset: retry_reads.RetrySet) -> str:
    who = getattr(user, "get_username", lambda: "")() or "an operator"
    return (
        f"Moved to the DLQ from the retry schedule {display_text(rset.key)} by {who} in busconsole, before "
        "its next retry ran. The schedule keeps no traceback; dlq_error is the last failure found in the "
        "stream's metric events."
    )


def retry_act(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    mode: str,
    legacy: bool = False,
    refs: Sequence[str] = (),
    up_to_ms: int | None = None,
) -> retry_actions.RetryOutcome:
    """Take the selected retries (``refs``) or, with ``up_to_ms``, every one due by then (at most
    :data:`~streams_app.redis_ops.actions.retries.BULK_LIMIT` per call) out of ``key``'s retry set:
    ``stream`` re-adds them to the stream now, ``dlq`` files them in the stream's DLQ with the bus's
    fields, ``delete`` drops them. Retries the bus's pump re-added meanwhile come back ``missing``."""
    action = _action(mode)
    rset = retry_reads.retry_set(key, legacy=legacy)
    params: dict[str, object] = {"set": display_text(rset.key)}
    if up_to_ms is not None:
        params.update(all=True, up_to_ms=up_to_ms)
    with action_audit(
        user=user, conn=conn, action=action, stream=key, ids=list(refs), params=params
    ) as record:
        note = _note(user, rset)
        if up_to_ms is not None:
            outcome = retry_actions.retry_take_all(conn, rset, mode=mode, up_to_ms=up_to_ms, note=note)
        else:
            outcome = retry_actions.retry_take(conn, rset, mode=mode, refs=refs, note=note)
        record.affected = len(outcome.taken)
        record.params.update(
            missing=len(outcome.missing), failed=len(outcome.failed), remaining=outcome.remaining
        )
        if outcome.target is not None:
            record.params["target"] = display_text(outcome.target)
    return outcome


def retry_act_count(
    *, user: UserLike | None, conn: str, key: bytes, mode: str, up_to_ms: int, legacy: bool = False
) -> int:
    """How many retries "all" would take now (the confirm page's figure), under the action's own role."""
    action = _action(mode) + ".count"
    rset = retry_reads.retry_set(key, legacy=legacy)
    params = {"set": display_text(rset.key), "up_to_ms": up_to_ms}
    with action_audit(user=user, conn=conn, action=action, stream=key, params=params) as record:
        count = retry_reads.retry_count(conn, rset, up_to_ms=up_to_ms)
        record.params["count"] = count
    return count
