"""The tail reader's pacing rule, and the two settings that trade a process's time for latency.

A hand-out to N clients costs N socket writes, so with many clients the wait the reader takes after a
hand-out is most of an entry's latency (docs/performance.md#the-tail-at-1000-clients). The rule
(``streams_app/live/node_reader.py``, "Pacing"): the budget earns ``share`` of the wall time that
passes, up to a burst, each hand-out spends its CPU time, and an overspent budget is waited back to zero,
for at most the cap. ``BUSCONSOLE_TAIL_FANOUT_PERCENT`` sets the share and ``BUSCONSOLE_TAIL_PACE_MAX_MS``
the cap. Expected waits are computed here from the rule as the docstring states it, with the clock
handed in (no timing).
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from streams_app.live.node_reader import PACE_BURST_S, NodeReader


def expected_waits(handouts: list[tuple[float, float]], share: float, cap: float) -> list[float]:
    """The rule, written out: (time, CPU seconds) of each hand-out -> the wait after it."""
    budget, last, out = 0.0, None, []
    for now, spent in handouts:
        earned = PACE_BURST_S if last is None else (now - last) * share
        last = now
        budget = min(PACE_BURST_S, budget + earned) - spent
        out.append(0.0 if budget >= 0 else min(cap, -budget / share))
    return out


# A process handing out to about 1,000 clients: 9 ms of CPU a hand-out, one every 10 ms of wall time.
HANDOUTS = [(100.0 + 0.010 * i, 0.009) for i in range(12)]


def waits(handouts: list[tuple[float, float]]) -> list[float]:
    reader = NodeReader(None, "node", cluster=False)  # pacing reads no owner
    return [reader.pace_wait(spent, now=now) for now, spent in handouts]


def test_the_default_share_and_cap_are_what_the_docs_say() -> None:
    got = waits(HANDOUTS)
    assert got == pytest.approx(expected_waits(HANDOUTS, 0.8, 0.004))
    assert 0 < max(got) <= 0.004


@override_settings(BUSCONSOLE_TAIL_FANOUT_PERCENT=30, BUSCONSOLE_TAIL_PACE_MAX_MS=12)
def test_a_lower_share_gives_hand_outs_less_of_the_process_and_waits_longer() -> None:
    got = waits(HANDOUTS)
    assert got == pytest.approx(expected_waits(HANDOUTS, 0.3, 0.012))
    assert max(got) == pytest.approx(0.012)  # the cap binds: 9 ms of hand-out would want more


@override_settings(BUSCONSOLE_TAIL_FANOUT_PERCENT=100)
def test_a_share_of_all_never_waits_while_hand_outs_fit_the_wall_time() -> None:
    assert waits(HANDOUTS) == [0.0] * len(HANDOUTS)
