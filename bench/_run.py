"""``make bench``: run every benchmark, then print one table of figure, floor, ratio, goal and verdict.

Each script runs in its own process (a fresh interpreter, its own private servers), one after the other
so that they never compete for the machine. Before each, the machine's load averages are printed: a
figure taken on a busy machine says so beside it. The scripts report their goals through
``bench/_summary.py`` into one JSON-lines file; this runner reads it back at the end.

Exit status: 1 if any goal was missed, any script failed, or a script reported no goal at all (a goal
that silently stopped being measured is a miss, not a pass); 0 otherwise.

``bench/scale.py`` is not run here: it is ``make bench-scale`` (100k streams on two databases, about
15 minutes). ``--only NAME[,NAME]`` runs some scripts; arguments after ``--`` go to every script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench._summary import SUMMARY_ENV, Row  # noqa: E402

SKIP = {"scale.py"}


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _table(rows: list[Row], loads: dict[str, str]) -> str:
    head = ("script", "goal", "figure", "floor", "ratio", "goal", "verdict")
    body = [
        (r.script, r.name, r.figure, r.floor, r.ratio, r.goal, "meets" if r.ok else "MISSES") for r in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body, strict=True)]

    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(cells) for cells in body]
    out.append("")
    out += [f"load average (1, 5, 15 min) before {name}: {load}" for name, load in loads.items()]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated script names, e.g. tail,search")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="after --: arguments for every script")
    args = parser.parse_args()
    only = {n.strip().removesuffix(".py") for n in args.only.split(",") if n.strip()}
    extra = args.rest[1:] if args.rest[:1] == ["--"] else args.rest

    scripts = [
        p for p in sorted(HERE.glob("[!_]*.py")) if p.name not in SKIP and (not only or p.stem in only)
    ]
    fd, summary = tempfile.mkstemp(prefix="bench-summary-", suffix=".jsonl")
    os.close(fd)
    env = {**os.environ, SUMMARY_ENV: summary, "PYTHONPATH": str(ROOT)}
    failed: list[str] = []
    silent: list[str] = []
    loads: dict[str, str] = {}
    seen = 0
    try:
        for script in scripts:
            loads[script.name] = _load()
            print(f"\n== {script.name} (load average {loads[script.name]})", flush=True)
            started = time.monotonic()
            code = subprocess.call([sys.executable, str(script), *extra], cwd=ROOT, env=env)
            print(f"== {script.name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
            if code != 0:
                failed.append(script.name)
            with open(summary, encoding="utf-8") as f:
                count = sum(1 for _ in f)
            if count == seen:
                silent.append(script.name)
            seen = count
        with open(summary, encoding="utf-8") as f:
            rows = [Row(**json.loads(line)) for line in f if line.strip()]
    finally:
        os.unlink(summary)

    print("\n" + _table(rows, loads))
    missed = [r for r in rows if not r.ok]
    if missed:
        print(f"\n{len(missed)} of {len(rows)} goals missed.")
    if failed:
        print(f"Scripts that failed: {', '.join(failed)}.")
    if silent:
        print(f"Scripts that reported no goal: {', '.join(silent)}.")
    if not (missed or failed or silent):
        print(f"\nAll {len(rows)} goals met.")
    return 1 if (missed or failed or silent) else 0


if __name__ == "__main__":
    sys.exit(main())
