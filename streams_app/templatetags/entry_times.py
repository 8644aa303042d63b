"""``{{ field|fieldtime }}``: the human time of a timestamp-like field of an entry, or None.

Producers stamp their messages (``ts`` in ms from the event bus, ``failed_at`` in float seconds from
OmniDaemon, ``created_at`` as ISO text from many others); an operator reading an entry wants the
time, not the number. A field counts as a timestamp when its name is ``ts``, ``timestamp`` or
``time`` or ends in ``_at`` (any case), and its value is an epoch in seconds or milliseconds between
2000 and 2100 (so a counter or an amount is not read as a date) or an ISO-8601 date-time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django import template

from eventbus.decoding import DecodedField
from eventbus.text import id_time
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_time

register = template.Library()

TIME_NAMES = frozenset({"ts", "timestamp", "time"})
#: Epochs (in seconds) a timestamp field may hold: 2000-01-01 to 2100-01-01 UTC.
EARLIEST_S = 946_684_800
LATEST_S = 4_102_444_800
_NUMBER = re.compile(r"[0-9]{1,16}(\.[0-9]{1,9})?")
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}.{0,30}")


def is_time_name(name: str) -> bool:
    lowered = name.lower()
    return lowered in TIME_NAMES or (lowered.endswith("_at") and len(lowered) > 3)


def value_time(text: str) -> datetime | None:
    """The UTC time ``text`` holds as an epoch (s or ms, in range) or an ISO-8601 date-time; else None."""
    text = text.strip()
    if _NUMBER.fullmatch(text):
        number = float(text)
        if EARLIEST_S <= number < LATEST_S:
            return id_time(round(number * 1000))
        if EARLIEST_S * 1000 <= number < LATEST_S * 1000:
            return id_time(round(number))
        return None
    if _ISO.fullmatch(text):
        try:
            return id_time(parse_time(text.replace(" ", "T", 1)))
        except InvalidArgument:
            return None
    return None


@register.filter
def fieldtime(field: DecodedField) -> datetime | None:
    """The time a timestamp-like field holds (see the module docstring), as an aware UTC datetime."""
    if (
        not is_time_name(field.name)
        or field.decoded.format != "text"
        or not isinstance(field.decoded.value, str)
    ):
        return None
    moment = value_time(field.decoded.value)
    return moment.astimezone(UTC) if moment is not None else None
