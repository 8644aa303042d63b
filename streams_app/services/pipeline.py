"""Start a data pipeline run (export, Spark rollups, load) from the "Run pipeline now" button."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams_app.jobs.models import Job
from streams_app.lake import run
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def pipeline_start(*, user: UserLike | None) -> Job:
    """The operator role, one audit row, then a ``pipeline`` job (refused while one is under way)."""
    with action_audit(user=user, conn="", action="pipeline.run") as record:
        job = run.pipeline_job_start(user=user)
        record.params["job"] = job.pk
    return job
