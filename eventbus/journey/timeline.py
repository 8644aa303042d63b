"""A journey's reads (:class:`~eventbus.journey.trace.Trace`) as one timeline: steps in time order, each
one line for a human and a JSON object for a script, plus what was read and what cannot be known.

Order: by time, and within one millisecond by cause (a publish before its delivery or an operator's
action on it, a failure before the retry it schedules, before the dead letter). A step whose time Redis does not keep (an
acknowledgement) sits at the time of its entry and says its time is not known (``time_known``).
A group's failures are told by the handler's metric events, so a group and an entry with a failure get
no separate "acknowledged" step: the bus acknowledged it when it scheduled the retry or dead-lettered it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import keys as bus_keys
from ..text import display_text, id_ms, id_order
from .trace import Trace

#: What the command line says about operator actions when no program that records them adds them.
NO_OPERATOR_LOG = ("Operator actions (requeues, claims, acks, replays by a person) are not in Redis: only the "
                   "audit log of the tool that made them holds them.")  # fmt: skip
ACKED_UNKNOWN = "acknowledged, or never delivered: Redis does not keep acked IDs"

_ORDER = {"publish": 0, "copy": 0, "retry": 0, "requeue": 0, "replay": 0, "operator": 1, "delivery": 1,
          "failed": 2, "reclaimed": 2, "dropped": 2, "retry_scheduled": 3, "waiting": 4, "dead_letter": 5}  # fmt: skip


@dataclass
class Step:
    kind: str
    at_ms: int
    text: str
    key: str = ""
    entry_id: str | None = None
    group: str | None = None
    time_known: bool = True
    consumer: str | None = None
    attempt: int | None = None
    error: str | None = None
    state: str | None = None
    fields: dict[str, str] | None = None
    #: the audit row of an operator action, from the program that recorded it (who, what, when, its id)
    audit: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def sort_key(self) -> tuple[int, int, int, int]:
        """Time, then cause, then (for entries added in the same millisecond) the ID's order."""
        return self.at_ms, _ORDER.get(self.kind, 6), *id_order(self.entry_id or "0-0")

    def json(self) -> dict[str, Any]:
        out = asdict(self)
        out["at"] = when(self.at_ms) if self.time_known else None
        return {k: v for k, v in out.items() if v not in (None, {}) or k in ("at",)}


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _entry_ms(entry_id: str) -> int:
    return id_ms(entry_id) or 0


def _get(fields: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    value = next((v for n, v in fields if n == name), None)
    return display_text(value) if value is not None else None


def steps(trace: Trace) -> list[Step]:
    """The timeline of ``trace``, in order (module docstring)."""
    if not trace.found_any:
        return []
    stream = display_text(trace.stream or b"")
    out: list[Step] = []
    first = trace.first_id
    for entry_id, fields in trace.entries.items():
        shown = {display_text(n): display_text(v) for n, v in fields}
        failed_id, retries = _get(fields, b"_failed_id"), _get(fields, b"_retries")
        requeued, replayed = _get(fields, b"_requeued_from"), _get(fields, b"_replayed_from")
        aimed = _get(fields, b"_group")
        if requeued:
            kind, text = "requeue", f"requeued from dead letter {requeued}: added to {stream} as {entry_id}"
        elif replayed:
            kind, text = "replay", f"replayed from {replayed}: added to {stream} as {entry_id}"
        elif failed_id:
            kind = "retry"
            text = f"retry {retries or '?'} of {failed_id}" + (f" for group {aimed}" if aimed else "")
            text += f": added to {stream} as {entry_id}"
        elif entry_id == first:
            kind, text = "publish", f"published to {stream} as {entry_id}"
        else:
            kind = "copy"
            text = f"copy added to {stream} as {entry_id}" + (f" with _retries={retries}" if retries else "")
        if shown.get("type"):
            text += f" (type {shown['type']})"
        out.append(Step(kind, _entry_ms(entry_id), text, key=stream, entry_id=entry_id, group=aimed,
                        attempt=int(retries) if retries and retries.isdigit() else None, fields=shown))  # fmt: skip
    for copy in trace.replays:
        target = display_text(copy.key)
        out.append(Step("replay", _entry_ms(copy.id), f"replayed from {copy.source_id} of {stream}: added to {target} "
                        f"as {copy.id}", key=target, entry_id=copy.id,
                        fields={display_text(n): display_text(v) for n, v in copy.fields}))  # fmt: skip
    metrics_key = display_text(bus_keys.metrics_key(trace.stream or b""))
    failures = {(m.group, m.entry_id) for m in trace.metrics}
    for m in trace.metrics:
        if m.kind == "dead_lettered":
            continue  # told with its dead letter (_dead_letter_steps)
        if m.kind == "failed":
            took = f", {m.duration_ms:.1f} ms" if m.duration_ms is not None else ""
            text = f"{m.group}: handler failed on {m.entry_id} ({m.consumer}{took}): {m.error or 'no error text'}"
        elif m.kind == "retried":
            text = f"{m.group}: retry of {m.entry_id} scheduled in {display_text(bus_keys.in_slot_of(trace.stream or b'', bus_keys.RETRY_SUFFIX.encode()))}"
        else:
            text = f"{m.group}: {m.kind} {m.entry_id} ({m.consumer})"
        kind = {"retried": "retry_scheduled"}.get(m.kind, m.kind)
        out.append(Step(kind, m.ms, text, key=metrics_key, entry_id=m.entry_id, group=m.group,
                        consumer=m.consumer or None, error=m.error))  # fmt: skip
    out += _dead_letter_steps(trace)
    for w in trace.waiting:
        text = f"{w.group or '?'}: retry {w.attempt or '?'} of {w.failed_id or '?'} waiting, due {when(w.due_ms)}"
        out.append(Step("waiting", w.failed_at_ms or w.due_ms, text,
                        key=display_text(bus_keys.in_slot_of(trace.stream or b"", bus_keys.RETRY_SUFFIX.encode())), entry_id=w.failed_id,
                        group=w.group, attempt=w.attempt, extra={"due": when(w.due_ms)}))  # fmt: skip
    for d in trace.deliveries:
        if d.state != "pending" and (d.group, d.entry_id) in failures:
            continue
        out.append(_delivery_step(trace, d))
    out.sort(key=Step.sort_key)
    return out


def _dead_letter_steps(trace: Trace) -> list[Step]:
    out = []
    lettered = [m for m in trace.metrics if m.kind == "dead_lettered"]
    used: set[str] = set()
    for d in trace.dead:
        metric = next((m for m in lettered if d.original_id and m.entry_id == d.original_id), None)
        if metric is None and not d.present:
            earlier = [m for m in lettered if m.ms <= (d.failed_at_ms or 0) + 1000 and m.entry_id not in used]
            metric = earlier[-1] if earlier else None
        if metric is not None:
            used.add(metric.entry_id)
        group = d.group or (metric.group if metric else None)
        error = d.error or (metric.error if metric else None)
        # a dead letter gone from its DLQ: the bus's metric event says the bus filed it, in {S}:dlq
        bus_dlq = display_text(bus_keys.dlq_key(display_text(trace.stream or b""))) if metric else "its DLQ"
        where = display_text(d.key) if d.present else bus_dlq
        text = f"dead-lettered to {where} as {d.id}"
        text += f" ({d.convention})" if d.convention else ""
        text += f", group {group}" if group else ""
        text += f", after {d.retries} retries" if d.retries is not None else ""
        text += f": {error}" if error else ""
        if not d.present:
            text += " (no longer in the DLQ: requeued, or deleted)"
        out.append(Step("dead_letter", metric.ms if metric else d.failed_at_ms or _entry_ms(d.id), text,
                        key=display_text(d.key) if d.present else "", entry_id=d.id, group=group, error=error,
                        state="present" if d.present else "gone",
                        extra={"original_id": d.original_id or (metric.entry_id if metric else None)}))  # fmt: skip
    for m in lettered:
        if m.entry_id not in used and not any(d.original_id == m.entry_id for d in trace.dead):
            out.append(Step("dead_letter", m.ms, f"{m.group}: dead-lettered {m.entry_id}: {m.error or ''} "
                            "(its dead letter was not found: requeued, deleted or trimmed)", entry_id=m.entry_id,
                            group=m.group, error=m.error, state="unknown"))  # fmt: skip
    return out


def _delivery_step(trace: Trace, d: Any) -> Step:
    stream = display_text(trace.stream or b"")
    at = _entry_ms(d.entry_id)
    if d.state == "pending":
        text = (f"{d.group}: pending {d.entry_id} for {d.consumer}, {d.deliveries} deliver"
                f"{'y' if d.deliveries == 1 else 'ies'}, idle {d.idle_ms / 1000:.1f} s")  # fmt: skip
        return Step("delivery", trace.now_ms - (d.idle_ms or 0), text, key=stream, entry_id=d.entry_id,
                    group=d.group, consumer=d.consumer, state="pending",
                    extra={"deliveries": d.deliveries, "idle_ms": d.idle_ms})  # fmt: skip
    if d.state == "not_delivered":
        text = f"{d.group}: not delivered yet ({d.entry_id} is after the group's last-delivered-id)"
    elif d.state == "skipped":
        text = f"{d.group}: skipped {d.entry_id}, a copy aimed at group {d.aimed_at} (acked without running)"
    elif d.certain:
        text = f"{d.group}: acknowledged {d.entry_id}"
    else:
        text = f"{d.group}: {d.entry_id} {ACKED_UNKNOWN}"
    return Step("delivery", at, text, key=stream, entry_id=d.entry_id, group=d.group, state=d.state,
                time_known=False)  # fmt: skip


@dataclass
class Journey:
    """What ``python -m eventbus journey``, the API and the page show: the timeline and what it covered."""

    trace: Trace
    steps: list[Step]

    def coverage(self) -> dict[str, Any]:
        reader = self.trace.reader
        assert reader is not None
        keys = {display_text(k): n for k, n in reader.keys.items()}
        return {
            "entries_read": len(reader.seen),
            "reads": reader.entries,
            "entries_total": sum(keys.values()),
            "keys": len(keys),
            "key_lengths": keys,
            "commands": reader.commands,
            "elapsed_ms": reader.elapsed_ms,
            "complete": self.trace.complete,
            "next": self.trace.next,
        }

    def summary(self) -> str:
        c = self.coverage()
        text = (f"looked at {c['entries_read']} of {c['entries_total']} entries in {c['keys']} keys, "
                f"in {c['elapsed_ms']} ms ({c['commands']} commands)")  # fmt: skip
        return text + ("" if c["complete"] else "; not complete: continue with --cursor " + str(c["next"])
                       if c["next"] else "; not complete")  # fmt: skip

    def notes(self) -> list[str]:
        out = list(self.trace.notes)
        if any(s.kind == "delivery" and s.state == "acked" and not s.time_known for s in self.steps):
            out.append("An entry no group holds pending was acknowledged, or never delivered to that group "
                       "(its position was set past it): Redis does not keep acked IDs, nor when.")  # fmt: skip
        if self.trace.bus_metrics:
            out.append("Handlers that succeed are counted per interval, not per event: a success shows as the "
                       "acknowledgement, without its duration.")  # fmt: skip
        return out

    def json(self) -> dict[str, Any]:
        t = self.trace
        return {
            "start": {"by": t.start.by, "value": t.start.value, "streams": [display_text(s) for s in t.start.streams]},
            "found": t.found_any,
            "stream": display_text(t.stream) if t.stream else None,
            "event_id": t.event_id,
            "first_id": t.first_id,
            "groups": t.groups,
            "steps": [s.json() for s in self.steps],
            "others": [{"stream": display_text(k), "entry_id": i} for k, i in t.others],
            "coverage": self.coverage(),
            "summary": self.summary(),
            "too_costly": t.too_costly,
            "notes": self.notes(),
        }

    def text(self) -> str:
        lines = []
        if self.trace.found_any:
            lines.append(f"event {self.trace.event_id or '(no event id)'} in {display_text(self.trace.stream or b'')},"
                         f" first published as {self.trace.first_id}")  # fmt: skip
        for s in self.steps:
            stamp = when(s.at_ms) if s.time_known else f"({when(s.at_ms)})"
            lines.append(f"{stamp}  {s.text}")
            if s.audit:
                lines.append(f"{'':26}  by {s.audit.get('user') or '?'}: audit row {s.audit.get('id')}, "
                             f"{s.audit.get('action')} at {s.audit.get('at')}")  # fmt: skip
        for key, entry_id in self.trace.others:
            lines.append(f"also matched: {display_text(key)} {entry_id} (another event)")
        lines.append(self.summary())
        lines += [f"note: {n}" for n in self.notes()]
        return "\n".join(lines)


def journey_of(trace: Trace) -> Journey:
    return Journey(trace, steps(trace))


def dumps(journey: Journey) -> str:
    return json.dumps(journey.json(), indent=2, ensure_ascii=False)
