"""The timeline's time window, carried in the address so that a reload, a shared link or a saved view
shows the same thing.

Two forms, as Grafana's time picker has them:

* live: ``?window=1h`` (or no parameter), the last hour up to now, moving with each snapshot;
* fixed: ``?from=<ISO>&to=<ISO>``, a window in the past. The permalink of any view is this form, so it
  reopens exactly the window that was on screen, and so are zooming and panning, which leave "now".

Spans are kept between :data:`SPAN_MIN` and :data:`SPAN_MAX`: the samples read for one page are bounded
by the span (the finest resolution whose retention reaches back, as the charts choose it), and a
window a few seconds wide would show no snapshot at all. Written here rather than taken from a
library: the arithmetic is a dozen lines, and the rules (clamping at now, the spans allowed) are the
console's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from streams_app.metrics.charts import Window
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_time

SPAN_MIN = timedelta(minutes=5)
SPAN_MAX = timedelta(days=7)

#: The live windows offered, by name.
PRESETS: dict[str, timedelta] = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
DEFAULT_PRESET = "1h"

#: Time-axis ticks: (at most this span, tick every, label format).
_TICKS = (
    (timedelta(minutes=20), 300, "%H:%M"),
    (timedelta(hours=1), 600, "%H:%M"),
    (timedelta(hours=3), 1800, "%H:%M"),
    (timedelta(hours=8), 3600, "%H:%M"),
    (timedelta(hours=24), 3 * 3600, "%H:%M"),
    (timedelta(days=3), 12 * 3600, "%a %H:%M"),
    (SPAN_MAX, 86400, "%a %d"),
)


def iso(moment: datetime) -> str:
    """A time as the address carries it: UTC, to the second, ``Z``."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span_text(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds // 60} min {seconds % 60} s"


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``[start, end]``; ``preset`` names a live window (its end is now), empty for a fixed one."""

    start: datetime
    end: datetime
    preset: str = ""

    @property
    def live(self) -> bool:
        return bool(self.preset)

    @property
    def span(self) -> timedelta:
        return self.end - self.start

    @property
    def chart_window(self) -> Window:
        """The window as :func:`streams_app.metrics.charts.chart_build` draws it (ticks to suit the span)."""
        step, fmt = next((s, f) for limit, s, f in _TICKS if self.span <= limit)
        return Window("timeline", int(self.span.total_seconds()), step, fmt, _span_text(self.span))

    def query(self) -> dict[str, str]:
        """This window as query parameters: the live form for a live window."""
        return {"window": self.preset} if self.live else self.permalink()

    def permalink(self) -> dict[str, str]:
        """The fixed form of exactly this window, whatever time it is when it is opened."""
        return {"from": iso(self.start), "to": iso(self.end)}

    def moved(self, *, by: float, now: datetime) -> dict[str, str]:
        """Panned by ``by`` spans (negative: earlier), never past now."""
        end = min(self.end + self.span * by, now)
        return {"from": iso(end - self.span), "to": iso(end)}

    def zoomed(self, *, factor: float, now: datetime) -> dict[str, str]:
        """The span times ``factor`` around the same middle (kept within the spans allowed and before now)."""
        span = min(max(self.span * factor, SPAN_MIN), SPAN_MAX)
        middle = self.start + self.span / 2
        end = min(middle + span / 2, now)
        return {"from": iso(end - span), "to": iso(end)}


def moment_parse(value: str, name: str) -> datetime:
    """An ISO-8601 date-time typed by a person (naive is UTC), or a 400 naming the field."""
    try:
        return datetime.fromtimestamp(parse_time(value) / 1000, tz=UTC)
    except InvalidArgument:
        raise InvalidArgument(f"{name}: {value[:64]!r} is not an ISO-8601 date-time (e.g. 2026-11-22T10:30:00Z).") from None
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{name}: {value[:64]!r} is out of range.") from None


def window_parse(params: dict[str, Any], *, now: datetime) -> TimeWindow:
    """The window a page's query string asks for; a 400 (InvalidArgument) for one it cannot show."""
    start_text, end_text, preset = params.get("from") or "", params.get("to") or "", params.get("window") or ""
    if not start_text and not end_text:
        if preset and preset not in PRESETS:
            raise InvalidArgument(f"window: one of {', '.join(PRESETS)}, or give from and to.")
        preset = preset or DEFAULT_PRESET
        return TimeWindow(start=now - PRESETS[preset], end=now, preset=preset)
    if not (start_text and end_text):
        raise InvalidArgument("Give both from and to (ISO-8601 date-times), or neither for the last hour.")
    start, end = moment_parse(start_text, "from"), moment_parse(end_text, "to")
    if end <= start:
        raise InvalidArgument("to must be after from.")
    if end - start < SPAN_MIN or end - start > SPAN_MAX:
        raise InvalidArgument(f"A window spans {_span_text(SPAN_MIN)} to {_span_text(SPAN_MAX)}.")
    return TimeWindow(start=start, end=end)
