"""Real Celery workers for the job tests, on the test's Redis and database file.

Workers take seconds to start, so one is shared by the tests of a module that do not kill theirs; a test
that runs a job in this process asks for ``no_worker`` so that no worker takes the job's queued task.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.celery_procs import Workers, celery_env

LOCK_S = 2  # the job lock of these workers: a killed worker's lock is gone within 2 s


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker) -> Iterator[Workers]:
    """Worker processes sharing the test database file (pytest-django's test DB, not the dev one)."""
    with django_db_blocker.unblock():
        env = celery_env(BUSCONSOLE_JOB_LOCK_S=str(LOCK_S))
    pool = Workers(env)
    yield pool
    pool.stop_all()


@pytest.fixture
def no_worker(workers: Workers) -> None:
    """For tests that run a job in this process: no worker may take the job's queued task meanwhile."""
    workers.stop_shared()
