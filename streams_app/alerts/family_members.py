"""The streams alert rules name, kept stream by stream when their connection is snapshotted by family
(docs/operations.md#stream-families).

A rule whose stream glob is one key (no unescaped ``*``, ``?`` or ``[``) names that stream; an open
alert names its target, so it can resolve. A rule over a glob watches many streams: it is evaluated per
family, not per member. A family rule (``family_*``) names no stream: it reads the family rows.
"""

from __future__ import annotations

import re

from streams_app.alerts.models import FAMILY_KINDS, Alert, AlertRule
from streams_app.metrics.signals import family_members_named

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


def _on_named(sender: object, *, conn: str, **kwargs: object) -> list[bytes]:
    return named_keys(conn)


def connect() -> None:
    family_members_named.connect(_on_named, dispatch_uid="streams_app.alerts.family_members")
