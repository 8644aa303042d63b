"""Cancel or resume a background job (the jobs themselves run in :mod:`streams_app.jobs.runner`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def job_cancel(*, user: UserLike | None, job: Job) -> Job:
    """Ask a queued or running job to stop after its current batch (what it did stays done)."""
    with action_audit(user=user, conn=job.connection, action="job.cancel", params={"job": job.pk}) as record:
        record.params["cancelled"] = jobs.job_cancel(job_id=job.pk)  # False: it had finished already
    job.refresh_from_db()
    return job


def job_resume(*, user: UserLike | None, job: Job) -> Job:
    """Run a failed, cancelled or stuck job again from where it stopped."""
    with action_audit(user=user, conn=job.connection, action="job.resume", params={"job": job.pk}):
        jobs.job_resume(job_id=job.pk)
    job.refresh_from_db()
    return job
