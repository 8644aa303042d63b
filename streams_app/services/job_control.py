"""Cancel or resume a background job (the jobs themselves run in :mod:`streams_app.jobs.runner`).

Who may cancel is decided by the role table like every action, with the job's owner in the action's
name: ``job.cancel`` (one's own job, any role: whoever started a job may stop it) and ``job.cancel.any``
(anyone's, operators and admins). A viewer's cancel of someone else's job is therefore refused and
audited as ``denied`` by the one role-and-audit path, as any other refusal is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def job_cancel_action(*, user: UserLike | None, job: Job) -> str:
    """The action a cancel of ``job`` by ``user`` is authorised and audited as (module docstring)."""
    own = job.created_by_id is not None and getattr(user, "pk", None) == job.created_by_id
    return "job.cancel" if own else "job.cancel.any"


def job_cancel(*, user: UserLike | None, job: Job) -> Job:
    """Ask a queued or running job to stop (within a second of its work; what it did stays done)."""
    action = job_cancel_action(user=user, job=job)
    with action_audit(user=user, conn=job.connection, action=action, params={"job": job.pk}) as record:
        record.params["cancelled"] = jobs.job_cancel(job_id=job.pk)  # False: it had finished already
    job.refresh_from_db()
    return job


def job_resume(*, user: UserLike | None, job: Job) -> Job:
    """Run a failed, cancelled or stuck job again from where it stopped."""
    with action_audit(user=user, conn=job.connection, action="job.resume", params={"job": job.pk}):
        jobs.job_resume(job_id=job.pk)
    job.refresh_from_db()
    return job
