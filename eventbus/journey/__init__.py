"""The journey of one event: every place it has been, on one timeline, read with bounded cost.

:mod:`.trace` reads (what ties an event's entries together, and each read's bound, are in its
docstring), :mod:`.timeline` orders what was read into steps, and :mod:`.reader` is the one door to Redis
that counts and bounds every command. Django-free: ``python -m eventbus journey`` runs it with Redis
alone, and a program that records operator actions runs the same code with its own masking (``shown``)
and hooks (:data:`Probe`, :data:`ReplayProbe`, :data:`SourceProbe`), adding the actions it recorded.
"""

from __future__ import annotations

from .timeline import NO_OPERATOR_LOG, Journey, Step, journey_of
from .trace import (
    BUDGET,
    BY,
    Delivery,
    JourneyError,
    Probe,
    Replayed,
    ReplayProbe,
    SourceProbe,
    Start,
    Trace,
    start_of,
    trace,
)

__all__ = ["BUDGET", "BY", "NO_OPERATOR_LOG", "Delivery", "Journey", "JourneyError", "Probe", "ReplayProbe", "Replayed",
           "SourceProbe", "Start", "Step", "Trace", "journey_of", "start_of", "trace"]
