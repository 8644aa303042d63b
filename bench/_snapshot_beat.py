"""The Celery app of ``bench/snapshot.py``'s beat window: busconsole's own, its beat schedule cut to the
metric snapshot.

The window measures the snapshot goal's (docs/performance.md#goals-and-floors) "at 100k streams every tick of the default interval recorded", the
snapshot's budget. The rest of the schedule has budgets of its own (the mirror sync within its
interval, retention within its run's budget), measured by the bench at 10k streams. Run beside the
snapshots at 100k streams, the mirror's first full pass and the retention of the rounds' fake history
would take the worker's second slot and the cores for minutes, and the row would say how the machine
copes with all three rather than whether the snapshot keeps its interval. The worker is the real one
(``celery -A busconsole worker``); only this beat process uses the app below.
"""

from __future__ import annotations

from busconsole.celery import app

# Under the app's ``CELERY`` namespace the prefixed key is the one read: ``beat_schedule`` set here
# would be shadowed by the Django setting.
app.conf.CELERY_BEAT_SCHEDULE = {"metrics-snapshot": app.conf.beat_schedule["metrics-snapshot"]}
if list(app.conf.beat_schedule) != ["metrics-snapshot"]:
    raise RuntimeError(f"the beat schedule was not cut to the snapshot: {list(app.conf.beat_schedule)}")
