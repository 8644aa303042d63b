"""Dead-letter queue conventions with the console's settings.

The conventions themselves (which keys are DLQs, what their entries mean, where a requeue goes, their
names and types) are :mod:`eventbus.conventions`, Django-free, so the bus's command line reads DLQs by
the same one copy; the console imports those from there. See its docstring for the layouts and the
format of ``BUSCONSOLE_DLQ_PATTERNS``, the console's setting of configured conventions. This module hands
that setting to the bus: the configured patterns come from ``settings.BUSCONSOLE_DLQ_PATTERNS``, a bad
value is ``ImproperlyConfigured`` (and a system check), and an entry no convention can requeue is
:class:`InvalidArgument`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from eventbus import conventions as _core
from eventbus.conventions import DlqEntry, DlqKind, DlqPattern, Fields
from eventbus.text import display_text

from .errors import InvalidArgument


def parse_dlq_patterns(text: str) -> tuple[DlqPattern, ...]:
    """Validate and compile the setting's value; cached per value (by :mod:`eventbus.conventions`)."""
    try:
        return _core.parse_dlq_patterns(text, "BUSCONSOLE_DLQ_PATTERNS")
    except _core.PatternError as exc:
        raise ImproperlyConfigured(str(exc)) from exc


def dlq_patterns() -> tuple[DlqPattern, ...]:
    """The configured conventions, from ``settings.BUSCONSOLE_DLQ_PATTERNS`` (a list is accepted too)."""
    raw = getattr(settings, "BUSCONSOLE_DLQ_PATTERNS", "") or ""
    if not isinstance(raw, str):
        try:
            raw = json.dumps(raw)
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(f"BUSCONSOLE_DLQ_PATTERNS cannot be read: {exc}") from exc
    return parse_dlq_patterns(raw)


def check_dlq_patterns(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """Django system check: a bad ``BUSCONSOLE_DLQ_PATTERNS`` stops ``manage.py check`` and startup."""
    try:
        dlq_patterns()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="streams_app.E101")]
    return []


def detect_dlq(key: bytes) -> DlqKind | None:
    """The convention a key follows, or None when it is not a DLQ (:func:`eventbus.conventions.detect_dlq`)."""
    return _core.detect_dlq(key, dlq_patterns())


def dlq_source_streams(key: bytes, entries: Iterable[DlqEntry] = ()) -> list[bytes]:
    """The streams a DLQ feeds back into: the key's hint, then each entry's stream, without repeats."""
    return _core.dlq_source_streams(key, entries, dlq_patterns())


def parse_dlq_entry(key: bytes, entry_id: str, fields: Fields) -> DlqEntry:
    """Read one DLQ entry by the convention of its key (and, for ``{stream}:dlq``, of the entry itself)."""
    return _core.parse_dlq_entry(key, entry_id, fields, dlq_patterns())


def requeue_plan(key: bytes, entry_id: str, fields: Fields) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The stream a requeue of this DLQ entry writes to and the fields it XADDs; :class:`InvalidArgument`
    when no convention can send it anywhere."""
    try:
        return _core.requeue_plan(key, entry_id, fields, dlq_patterns())
    except _core.NotADlq as exc:
        raise InvalidArgument(f"{display_text(key)!r} is not a dead-letter queue the console knows.") from exc
    except _core.NotRequeueable as exc:
        raise InvalidArgument(str(exc)) from exc
