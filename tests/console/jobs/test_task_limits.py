"""Every console task can be sent: Celery 5.7 refuses ``apply_async`` of a task whose soft time limit
is above its hard one (``ValueError: soft_time_limit must be less than or equal to time_limit``).

A task that sets only ``time_limit`` takes its soft limit from the app's ``task_soft_time_limit``
(``CELERY_TASK_SOFT_TIME_LIMIT``, 3,570 s by default): the beat's tasks and the alert webhook, whose
hard limits are a minute, could no longer be sent (Celery 5.5 sent them, and the hard limit came first).
The rule checked is Celery's own condition, applied to each task as the app binds it.
"""

from __future__ import annotations

from busconsole.celery import app as celery_app


def test_no_console_task_has_a_soft_limit_above_its_hard_one() -> None:
    import streams_app.tasks  # noqa: F401  (registers the tasks)

    tasks = {name: task for name, task in celery_app.tasks.items() if not name.startswith("celery.")}
    assert len(tasks) >= 5
    refused = {
        name: (task.soft_time_limit, task.time_limit)
        for name, task in tasks.items()
        if task.soft_time_limit and task.time_limit and task.soft_time_limit > task.time_limit
    }
    assert refused == {}
