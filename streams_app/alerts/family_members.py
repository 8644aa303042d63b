"""The streams alert rules name, kept stream by stream when their connection is snapshotted by family
(docs/operations.md#stream-families).

A rule whose stream glob is one key (no unescaped ``*``, ``?`` or ``[``) names that stream; an open
alert names its target, so it can resolve. A rule over a glob watches many streams (:func:`watches`): the
rolling family pass keeps each member it finds in a state the rule could fire on, within the members' cap
(after plain keys, single-key families and DLQs, before other stuck streams): a group lag rule's members
with a matching group's lag above the rule's N, a pending rule's (``oldest_pending_above``) with a matching
group's pending entries. Consumer-inactive and silent-stream rules over a glob keep no member this way
(XINFO STREAM and XINFO GROUPS, all the pass reads, do not tell a consumer's idle time or a stream's
silence), nor does a DLQ growth rule, whose DLQs are kept anyway. A family rule (``family_*``) names no
stream: it reads the family rows.
"""

from __future__ import annotations

import re

from streams_app.alerts.models import FAMILY_KINDS, Alert, AlertRule
from streams_app.metrics.signals import MemberWatch, family_members_named, family_members_watched

_SPECIAL = re.compile(rb"(?<!\\)[*?\[]")
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)


def named_keys(conn: str) -> list[bytes]:
    """The stream keys of ``conn`` named by an enabled rule or an open alert."""
    keys: dict[bytes, None] = {}
    rules = AlertRule.objects.filter(enabled=True, connection__in=["", conn]).exclude(kind__in=FAMILY_KINDS)
    for glob in rules.values_list("stream_glob", flat=True):
        raw = glob.encode()
        if raw and not _SPECIAL.search(raw):
            keys[_ESCAPE.sub(rb"\1", raw)] = None
    opened = Alert.objects.filter(connection=conn, state=Alert.State.OPEN, rule__enabled=True).exclude(
        rule__kind__in=FAMILY_KINDS
    )
    for key in opened.values_list("target_key", flat=True):
        keys[bytes(key)] = None
    return list(keys)


def watches(conn: str) -> list[MemberWatch]:
    """What the enabled group lag and pending rules of ``conn`` over a glob could fire on."""
    out: list[MemberWatch] = []
    rules = AlertRule.objects.filter(
        enabled=True, connection__in=["", conn],
        kind__in=[AlertRule.Kind.GROUP_LAG_ABOVE, AlertRule.Kind.OLDEST_PENDING_ABOVE],
    )
    for kind, stream_glob, group_glob, threshold in rules.values_list("kind", "stream_glob", "group_glob", "threshold"):
        if stream_glob and not _SPECIAL.search(stream_glob.encode()):
            continue  # a plain key: named, kept whatever its state
        if kind == AlertRule.Kind.GROUP_LAG_ABOVE:
            out.append(MemberWatch(stream_glob=stream_glob, group_glob=group_glob, lag_above=threshold))
        else:
            out.append(MemberWatch(stream_glob=stream_glob, group_glob=group_glob, pending=True))
    return out


def _on_watched(sender: object, *, conn: str, **kwargs: object) -> list[MemberWatch]:
    return watches(conn)


def _on_named(sender: object, *, conn: str, **kwargs: object) -> list[bytes]:
    return named_keys(conn)


def connect() -> None:
    family_members_named.connect(_on_named, dispatch_uid="streams_app.alerts.family_members")
    family_members_watched.connect(_on_watched, dispatch_uid="streams_app.alerts.family_members.watched")
