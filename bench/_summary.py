"""The rows of ``make bench``'s closing table: one per goal, each a figure against a floor from the same run.

Every goal of docs/performance.md#goals-and-floors is a ratio to a floor measured in the same run on the same machine, so a
benchmark reports each goal as one row: what was measured, the floor it is compared with, their ratio,
the goal and the verdict. ``bench/_run.py`` (what ``make bench`` runs) collects the rows of every script
and prints them as one table at the end; it fails when any verdict is a miss.

A script run on its own prints its rows as it goes, so nothing here changes how it reads by hand. Under
the runner, ``BENCH_SUMMARY`` names a JSON-lines file that the rows are appended to as well.

Two shapes cover every goal:

- :func:`within`: lower is better (a latency, a time). ``ratio = figure / floor``, met when at most
  ``max_ratio``. "p99 within 3x of a bare XREAD's p99".
- :func:`at_least`: higher is better (a rate). ``ratio = figure / floor``, met when at least
  ``min_ratio``. "publish_many >= 0.7x raw pipelined XADD".

:func:`check` is for the goals that are not a ratio (a page's size, a count of round trips, "all
delivered"): the figure and the limit are given as text and the verdict by the caller.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

SUMMARY_ENV = "BENCH_SUMMARY"


@dataclass(frozen=True)
class Row:
    script: str
    name: str
    figure: str
    floor: str
    ratio: str
    goal: str
    ok: bool


def _script() -> str:
    import __main__

    return os.path.basename(getattr(__main__, "__file__", "") or "?")


def _fmt(value: float, unit: str) -> str:
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "ms":
        return f"{value:,.2f} ms" if value < 100 else f"{value:,.0f} ms"
    if unit == "s":
        return f"{value:,.2f} s"
    return f"{value:,.4g}{(' ' + unit) if unit else ''}"


def emit(row: Row) -> Row:
    """Print one row and, under the runner, append it to the summary file."""
    verdict = "meets" if row.ok else "MISSES"
    print(
        f"[bench] {row.name}: {row.figure} vs floor {row.floor} = {row.ratio} (goal {row.goal}): {verdict}",
        flush=True,
    )
    path = os.environ.get(SUMMARY_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(row)) + "\n")
    return row


def within(name: str, figure: float, floor: float, max_ratio: float, *, unit: str = "ms") -> bool:
    """Lower is better: met when ``figure / floor <= max_ratio``. Returns the verdict."""
    ratio = figure / floor if floor > 0 else float("inf")
    ok = ratio <= max_ratio
    emit(
        Row(_script(), name, _fmt(figure, unit), _fmt(floor, unit), f"{ratio:.2f}x", f"<= {max_ratio:g}x", ok)
    )
    return ok


def at_least(name: str, figure: float, floor: float, min_ratio: float, *, unit: str = "/s") -> bool:
    """Higher is better: met when ``figure / floor >= min_ratio``. Returns the verdict."""
    ratio = figure / floor if floor > 0 else 0.0
    ok = ratio >= min_ratio
    emit(
        Row(_script(), name, _fmt(figure, unit), _fmt(floor, unit), f"{ratio:.2f}x", f">= {min_ratio:g}x", ok)
    )
    return ok


def check(name: str, figure: str, limit: str, ok: bool, *, floor: str = "-", ratio: str = "-") -> bool:
    """A goal that is not a ratio: ``figure`` against ``limit`` (both text); the caller decides ``ok``."""
    emit(Row(_script(), name, figure, floor, ratio, limit, ok))
    return ok
