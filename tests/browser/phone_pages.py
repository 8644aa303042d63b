"""What the phone layout tests share: the viewport, long names with nowhere to break, the dead letters
and the stuck group they stress a page with, and the scripts that measure boxes in the browser
(the ``phone`` fixture, a factory of logged-in phone-sized tabs, is in ``tests/browser/conftest.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import redis

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "phone"
PHONE = {"width": 390, "height": 844}

# Names as buses make them: long, with nowhere to break.
STREAM = b"tenant-acme:region-europe-west-1:service-order-management:orders-created-events-v2"
DLQ = STREAM + b":dlq"
GROUP = b"billing-settlement-workers"
UNBROKEN = "x" * 40 + "-" + "0123456789abcdef" * 8

# The box of each element, null when it is missing. A selector is CSS, or [CSS, TEXT]: the element
# inside CSS that draws TEXT, as its own text or as its ::before (a label drawn before a cell's value;
# its box is then the cell's, which starts with it).
BOXES = """
(selectors) => Object.fromEntries(Object.entries(selectors).map(([name, sel]) => {
  const drawn = (e) => e.textContent.trim() === sel[1] && ![...e.children].some((c) => c.textContent.trim() === sel[1])
    || getComputedStyle(e, "::before").content === JSON.stringify(sel[1]);
  const el = typeof sel === "string" ? document.querySelector(sel)
    : [...document.querySelectorAll(sel[0] + " *")].find(drawn);
  if (!el) return [name, null];
  const b = el.getBoundingClientRect();
  return [name, {left: b.left, right: b.right, top: b.top, bottom: b.bottom, width: b.width, height: b.height}];
}))
"""

# Whether the element is drawn inside the viewport and is the topmost thing at its centre (not covered).
IN_VIEW = """
(el) => {
  const b = el.getBoundingClientRect();
  const inside = b.width > 0 && b.height > 0 && b.left >= 0 && b.top >= 0
    && b.right <= window.innerWidth && b.bottom <= window.innerHeight;
  const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
  return {inside, on_top: !!hit && (hit === el || el.contains(hit)),
          box: [Math.round(b.left), Math.round(b.top), Math.round(b.right), Math.round(b.bottom)]};
}
"""

SCROLL_WIDTH = "[document.scrollingElement.scrollWidth, window.innerWidth]"


def dead_letters(r: redis.Redis, n: int = 3) -> list[str]:
    ids = [r.xadd(STREAM, {"type": "order.created", "data": json.dumps({"order_id": i})}).decode() for i in range(n)]
    return [
        r.xadd(DLQ, {
            "type": "order.created",
            "data": json.dumps({"order_id": i, "note": UNBROKEN, "customer": "c" * 120}),
            "token": UNBROKEN,
            "dlq_original_stream": STREAM,
            "dlq_original_id": ids[i],
            "dlq_group": GROUP,
            "dlq_error": f"ValueError: {UNBROKEN} declined {i}",
            "dlq_retries": "5",
            "dlq_traceback": "Traceback (most recent call last):\n  " + UNBROKEN,
            "dlq_failed_at": "1700000000000",
        }).decode()
        for i in range(n)
    ]


def stuck_group(r: redis.Redis, n: int) -> list[str]:
    """``n`` entries of STREAM, all delivered to one consumer of GROUP and never acked."""
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(STREAM, {"type": "order.created", "data": json.dumps({"order_id": i})})
    ids = [i.decode() for i in pipe.execute()]
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, b"worker-7f3c9a2e-4b1d-4e8f-9a6b-2c5d8e1f0a3b", {STREAM: ">"}, count=n)
    assert r.xpending(STREAM, GROUP)["pending"] == n
    return ids


def dlq_page() -> str:
    return f"/c/default/dlq/{quote(DLQ, safe='')}/"


def group_page() -> str:
    return f"/c/default/streams/{quote(STREAM, safe='')}/groups/{quote(GROUP, safe='')}/"


def outside_width(boxes: dict, width: int) -> dict:
    """The boxes (of those measured) that are missing, empty or not within 0..width."""
    return {
        name: box for name, box in boxes.items()
        if box is None or box["width"] <= 0 or box["left"] < 0 or box["right"] > width + 0.5
    }
