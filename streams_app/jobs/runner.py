"""Background jobs: the runner that creates, enqueues, runs, cancels and resumes them in resumable batches.

Why the care: Celery's Redis broker delivers a task again when its worker dies before acking it
(``acks_late``), the beat task :func:`jobs_resume_stalled` re-enqueues jobs whose worker vanished,
and an operator may press "Resume". So :func:`job_run` may be called several times for one job, even
concurrently, and must behave as if it ran once:

* a finished job (done, failed, cancelled) is never run again;
* a per-job lock on the console's Redis keeps two workers off one job; it expires
  ``BUSCONSOLE_JOB_LOCK_S`` after its holder stopped renewing it (it renews after every batch, and a
  heartbeat thread renews it every few seconds inside a long batch);
* each batch continues from a cursor, and the work of every kind is idempotent where it lands (see
  :mod:`streams_app.jobs.kinds`), which is what makes "exactly once" hold even when a worker dies
  between a batch and the save of its cursor.

**A dead worker is noticed in seconds.** While a job runs, the heartbeat also touches its
``updated_at`` every :data:`HEARTBEAT_S` (or faster when the settings ask for it), whether or not a
batch ended; a job silent for ``BUSCONSOLE_JOB_STALLED_S`` (30 s by default) has lost its worker, and
the beat task :func:`jobs_resume_stalled` enqueues it again within ``BUSCONSOLE_JOB_RESUME_EVERY_S``.

**Counts are exact after a crash.** A worker killed between a batch and the save of its result leaves
``done`` short of what Redis moved. A run that follows a run which did not stop cleanly (see
:attr:`Progress.settled`) lets its kind reconcile the count from Redis before it goes on: the replay
from the count its script keeps next to its cursor, the requeue from what left the DLQ since the last
save (see :mod:`streams_app.jobs.kinds` for each kind's bound).

**A read-only process never changes a monitored Redis.** ``BUSCONSOLE_READ_ONLY=1`` is checked here,
at run time, in the process that runs the job: a job of a kind that writes a monitored Redis (every
kind but those in :data:`READ_ONLY_KINDS`) is refused when a read-only worker takes it, whether it was
queued before the worker started, redelivered or resumed, and the beat of a read-only process refuses
the stalled ones instead of enqueueing them. A refused job ends ``failed`` with
:data:`READ_ONLY_REFUSAL` as its error and one ``denied`` audit row; it may be resumed from a console
that may write.

**No user's jobs hold the workers others need.** Three rules, made after a viewer's two
costly exports held both workers while an operator's replay waited five minutes, and the viewer could
not stop them (docs/decisions.md#jobs-on-their-own-queue-one-job-per-user):

* jobs run on a queue and workers of their own, apart from the beat's upkeep of the bus (snapshots,
  mirror sync, resumes, alert evaluation): see :mod:`busconsole.celery`;
* each user holds at most ``BUSCONSOLE_JOBS_PER_USER`` jobs queued or running (1 by default; one more
  is :class:`JobLimitReached`, a 409 audited ``denied``), and ``make run`` gives jobs two worker slots:
  one user's jobs never hold every slot, so that scenario (two exports, then a replay) runs the
  replay at once, beside the one export accepted. A busy console adds job workers; the limit keeps
  each user to their share of them;
* a job that may fix the bus (every kind not in :data:`READ_ONLY_KINDS`: replay, requeue) is sent at
  :data:`FIX_PRIORITY`, before the queued reads (exports, pipeline runs): when every slot is taken by
  other users' exports, the replay is the next job to start. And any job stops within
  :data:`CHECK_EVERY_S` of work once cancelled (:meth:`Progress.check`); its owner may cancel it, an
  operator or admin anyone's (``job.cancel`` / ``job.cancel.any``).

Progress goes to the job's channel-layer group (:func:`streams_app.live.groups.job_group`) as small
events for live pages; a failure to broadcast never fails the job.

**Kinds, and where they meet the runner.** The runner knows each kind by its name only (:data:`KINDS`,
the values of ``Job.kind``). The body of a kind lives with the feature it belongs to: requeue-all and
replay in :mod:`streams_app.jobs.kinds`, the pipeline in :mod:`streams_app.lake.run`; each of those
imports this module (to create its jobs, and for :class:`Progress`), so this module imports none of
them. ``StreamsAppConfig.ready`` hands the bodies to :func:`kinds_register`: it is the one place that
sees every package, and it runs in every process that may run a job (a Celery worker, ``manage.py``,
the tests), after Django has loaded them all. The Celery task is reached the same way, by its name
(:data:`RUN_JOB_TASK`): the task module imports this one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from busconsole import locks
from busconsole.celery import app as celery_app
from eventbus.text import display_text
from streams_app.accounts.roles import read_only_blocked, require_writable
from streams_app.audit.models import AuditEvent
from streams_app.audit.records import audit_write_system
from streams_app.jobs.models import Job
from streams_app.live import broadcast
from streams_app.redis_ops.errors import InvalidArgument, OpsError, Unreachable

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

log = logging.getLogger(__name__)

KIND_REQUEUE_ALL = "dlq.requeue_all"
KIND_REPLAY = "replay"
KIND_PIPELINE = "pipeline"  # export, Spark rollups and load: streams_app.lake.run
KIND_EXPORT = "export"  # a range written to a file for download: streams_app.exports.files
KIND_REQUEUE_MATCHING = "dlq.requeue_matching"  # the dead letters a search matches: streams_app.search.requeue
KIND_REQUEUE_FILTERED = "dlq.requeue_filtered"  # a DLQ triage count's dead letters: streams_app.triage.requeue
KINDS = (KIND_REQUEUE_ALL, KIND_REPLAY, KIND_PIPELINE, KIND_EXPORT, KIND_REQUEUE_MATCHING, KIND_REQUEUE_FILTERED)
#: Kinds that never change a monitored Redis, so a read-only process may run them. The pipeline reads
#: the monitored Redis only (SCAN, XINFO, XRANGE pages) and writes the lake and the console's own
#: tables, which read-only mode does not protect: a read-only console keeps its reports fresh. Every
#: other kind, including any added later, is refused by a read-only process until listed here.
READ_ONLY_KINDS = frozenset({KIND_PIPELINE, KIND_EXPORT})  # an export only reads (XRANGE pages)
#: The error of a job a read-only process refused.
READ_ONLY_REFUSAL = (
    "Refused: this process runs read-only (BUSCONSOLE_READ_ONLY=1) and never changes a monitored Redis; "
    "this run changed nothing. Resume the job from a console that may write."
)

#: The Celery task that runs a job (``streams_app.tasks.run_job`` declares itself under this name).
RUN_JOB_TASK = "streams_app.tasks.run_job"

#: The broker's priority of a job's task (on Redis, 0 is served first, then 3, 6, 9): a job that may fix
#: the bus (replay, requeue) goes before the queued jobs that only read it (exports, pipeline runs).
FIX_PRIORITY = 0
READ_PRIORITY = 6

#: Progress (counters, cursor, lock renewal, broadcast, cancel check) is saved at most this often.
#: The Redis side is exact either way; after a crash ``done`` lags by up to this much work until the
#: next run reconciles it from Redis (:attr:`Progress.settled`).
SAVE_EVERY_S = 0.25
#: A body's :meth:`Progress.check` looks at the job's state at most this often: a cancel (or a lost
#: lock) stops a job within this much of its work however long its batches are (one indexed read).
CHECK_EVERY_S = 0.5
#: Broadcasts are at most this often (plus one at every state change): a page needs no more.
BROADCAST_EVERY_S = 0.25
#: A running job touches ``updated_at`` and renews its lock at least this often, inside long batches
#: too (faster when the stalled threshold or the lock's expiry are short: see :func:`_heartbeat_every`).
HEARTBEAT_S = 5.0
#: A job left queued (its task message lost, say) is enqueued again after this many stalled periods:
#: a queue that is merely busy must not fill with copies of the jobs waiting in it.
QUEUED_STALLED_FACTOR = 10


class JobBusy(Exception):
    """Another worker holds this job's lock: try again later (it may have died; the lock expires)."""


class JobLimitReached(OpsError):
    """The user already holds ``BUSCONSOLE_JOBS_PER_USER`` jobs queued or running: a 409 that says which.

    The one role-and-audit path (:mod:`streams_app.services.audit`) writes the attempt as ``denied``.
    """

    code = "too_many_jobs"
    status = 409


class JobCancelled(Exception):
    """The job was cancelled while it ran; it stops at its next save or check (within a second of work)."""


# ------------------------------------------------------------------------------------ creating


def job_create(
    *, kind: str, conn: str, user: UserLike | None, key: bytes, parameters: dict[str, Any]
) -> Job:
    """Record a job and enqueue it once the surrounding transaction commits.

    Keys are bytes, so parameters hold them as hex (``key``) next to their display text.
    A replay gets a ``job_key``: the name of its Redis-side cursor, unique per job (two consoles, or a
    reset database, must not share one).
    """
    if kind not in KINDS:
        raise InvalidArgument(f"Unknown job kind {kind!r}.")
    if kind not in READ_ONLY_KINDS:
        require_writable()
    params = {"key": key.hex(), "key_text": display_text(key), **parameters}
    if kind == KIND_REPLAY:
        params["job_key"] = f"busconsole:replay-cursor:{uuid.uuid4().hex}"
    account = user if user is not None and user.is_authenticated else None
    with transaction.atomic():  # counted and created under one lock (see _require_slot)
        if account is not None:
            _require_slot(account.pk, who="You have")
        job = Job.objects.create(kind=kind, connection=conn, parameters=params, created_by=account)
    job_enqueue(job_id=job.pk, kind=kind)
    return job


def _require_slot(user_id: int, *, who: str, resuming: int | None = None) -> None:
    """Raise :class:`JobLimitReached` when the user holds ``BUSCONSOLE_JOBS_PER_USER`` jobs queued or
    running (not counting ``resuming``). Call it inside the transaction that creates the job.

    The user's row is locked first, so two requests of one user count one after the other instead of
    both finding a free slot (PostgreSQL; on SQLite, whose transactions here begin IMMEDIATE, every
    writer already waits for the one before). Jobs the console starts itself (no user) are not counted.
    """
    list(get_user_model().objects.select_for_update().filter(pk=user_id).values_list("pk", flat=True))
    limit = settings.BUSCONSOLE_JOBS_PER_USER
    held = list(
        Job.objects.filter(created_by_id=user_id, state__in=[Job.State.QUEUED, Job.State.RUNNING])
        .exclude(pk=resuming)  # type: ignore[misc]  # pk=None (not resuming) excludes no job
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if len(held) < limit:
        return
    names = ", ".join(f"job {pk}" for pk in held[:5]) + (", ..." if len(held) > 5 else "")
    raise JobLimitReached(
        f"{who} {len(held)} job{'s' if len(held) != 1 else ''} queued or running ({names}), and each user may "
        f"hold {limit} at a time (BUSCONSOLE_JOBS_PER_USER). Wait for it to end or cancel it on its page, "
        "then start this one."
    )


def job_enqueue(*, job_id: int, kind: str) -> None:
    """Send the job to a worker after commit, so the worker finds the row; a fix before reads
    (:data:`FIX_PRIORITY`), on the jobs' own queue (``CELERY_TASK_ROUTES``).

    By the task's name (Celery's ``signature``), since the task module imports this one. Where the
    task is registered (every Django process: ``StreamsAppConfig.ready`` imports the task module) the
    signature is the task's own ``apply_async``, so ``task_always_eager``, routes and the task's
    options apply exactly as they would to ``run_job.delay``.

    ``robust``: a broker that is down at that moment is logged, not raised into the request; the
    job stays queued and :func:`jobs_resume_stalled` enqueues it later.
    """
    transaction.on_commit(lambda: job_send(job_id=job_id, kind=kind), robust=True)


def job_send(*, job_id: int, kind: str | None = None, countdown: float | None = None) -> None:
    """Send the task that runs job ``job_id`` now: the one send of every job's task, the first
    (:func:`job_enqueue`, after commit) and a continuation after Celery's soft time limit
    (``streams_app.tasks.run_job``, ``countdown`` 1), so each goes on the jobs' queue at its kind's
    priority. ``kind`` is read from the job's row when not given (nothing is sent for a deleted job).
    """
    if kind is None:
        kind = Job.objects.filter(pk=job_id).values_list("kind", flat=True).first()
        if kind is None:
            log.warning("job %s does not exist (deleted?): not sent", job_id)
            return
    priority = READ_PRIORITY if kind in READ_ONLY_KINDS else FIX_PRIORITY
    celery_app.signature(RUN_JOB_TASK, args=(job_id,)).apply_async(priority=priority, countdown=countdown)  # type: ignore[arg-type]  # celery takes None: no delay


def job_cancel(*, job_id: int) -> bool:
    """Mark a queued or running job cancelled; a running one stops after its current batch."""
    changed = Job.objects.filter(pk=job_id, state__in=[Job.State.QUEUED, Job.State.RUNNING]).update(
        state=Job.State.CANCELLED, finished_at=timezone.now(), updated_at=timezone.now()
    )
    if changed:
        job_broadcast(Job.objects.get(pk=job_id), force=True)
    return bool(changed)


def job_resume(*, job_id: int) -> Job:
    """Queue a job that failed, was cancelled or seems stuck again; it continues from its cursor.

    A read-only process refuses to resume a kind that writes a monitored Redis (PermissionDenied),
    and a read-only worker would refuse to run it anyway.
    """
    job = Job.objects.select_related("created_by").get(pk=job_id)
    if job.kind not in READ_ONLY_KINDS:
        require_writable()
    if job.state == Job.State.DONE:
        raise InvalidArgument(f"Job {job_id} is done; there is nothing left to resume.")
    with transaction.atomic():
        if job.is_finished and job.created_by is not None:  # it takes a slot of its owner's again
            _require_slot(job.created_by.pk, who=f"{job.created_by.get_username()} has", resuming=job_id)
        Job.objects.filter(pk=job_id).update(
            state=Job.State.QUEUED if job.state != Job.State.RUNNING else job.state,
            finished_at=None,
            error="",
            updated_at=timezone.now(),
        )
    job_enqueue(job_id=job_id, kind=job.kind)
    job.refresh_from_db()
    return job


def jobs_resume_stalled(*, stalled_after_s: float | None = None) -> list[int]:
    """Enqueue again the jobs whose worker died; the ids of those enqueued.

    A running job beats every few seconds, even inside a long batch (:func:`_heartbeat`), so a
    running job silent for ``BUSCONSOLE_JOB_STALLED_S`` lost its worker (killed, OOM, machine lost).
    A queued job waits :data:`QUEUED_STALLED_FACTOR` times longer (its task message was lost, or the
    broker was down when it was created). Marking them as touched keeps the next beat from enqueueing
    them again while the first re-run waits in the queue.

    In a read-only process the stalled jobs of kinds that write a monitored Redis are refused (ended
    ``failed`` with one ``denied`` audit row) rather than enqueued for a worker that may write.
    """
    limit = settings.BUSCONSOLE_JOB_STALLED_S if stalled_after_s is None else stalled_after_s
    now = timezone.now()
    stalled = list(
        Job.objects.filter(
            Q(state=Job.State.RUNNING, updated_at__lte=now - timedelta(seconds=limit))
            | Q(state=Job.State.QUEUED, updated_at__lte=now - timedelta(seconds=limit * QUEUED_STALLED_FACTOR))
        ).values_list("pk", "kind")
    )
    enqueued: list[int] = []
    for job_id, kind in stalled:
        if kind not in READ_ONLY_KINDS and read_only_blocked():
            _refuse(job_id)
            continue
        Job.objects.filter(pk=job_id).update(updated_at=now)
        log.warning("job %s made no progress for %ss: enqueued again", job_id, limit)
        job_enqueue(job_id=job_id, kind=kind)
        enqueued.append(job_id)
    return enqueued


# ------------------------------------------------------------------------------------- running


class Progress:
    """Saves a job's counters and cursor after each batch, renews its lock, broadcasts, checks cancel.

    What a kind's body gets with its job: ``save`` raises :class:`JobCancelled` once the job was
    cancelled and :class:`JobBusy` once its lock was lost, so the body stops at its next batch; a body
    whose batch may run long (a search query on every entry of an export part) calls ``check`` inside
    it, as often as it likes, so that it stops within :data:`CHECK_EVERY_S` of work.
    ``settled`` tells the body whether the saved progress it starts from is the whole truth (the
    previous run stopped right after a save) or may lag behind Redis (the previous run died, hit its
    time limit or failed mid-batch), in which case the body reconciles its counts from Redis first.
    """

    #: The key under which a run that stopped cleanly marks its last saved progress.
    SETTLED = "settled"

    def __init__(self, job: Job, lock: locks.RenewableLock) -> None:
        self.job = job
        self.lock = lock
        self.notes: list[str] = []
        self.settled = bool((job.progress or {}).get(self.SETTLED))
        self.lock_lost = threading.Event()  # set by the heartbeat when the lock could not be renewed
        self._saved_at = 0.0
        self._checked_at = time.monotonic()

    def due(self) -> bool:
        """Whether a ``save`` without ``force`` would write now (a body may gather extra figures first)."""
        return time.monotonic() - self._saved_at >= SAVE_EVERY_S

    def check(self, *, force: bool = False) -> None:
        """Raise :class:`JobCancelled` once the job was cancelled, :class:`JobBusy` once its lock was lost.

        For the middle of a long batch, where nothing can be saved yet: cheap enough to call for every
        entry (it reads the job's state at most every :data:`CHECK_EVERY_S`), and it leaves the saved
        progress as it was, so a resumed run starts from the last save (a kind whose batch changed Redis
        meanwhile reconciles, as after a crash: the progress is not marked settled).

        ``force`` reads it now, however recent the last look: for a body that calls this only at the
        boundaries of long steps (the pipeline's chunks), where a look skipped waits a whole step.
        """
        now = time.monotonic()
        if not force and now - self._checked_at < CHECK_EVERY_S:
            return
        self._checked_at = now
        if self.lock_lost.is_set():
            raise JobBusy(f"job {self.job.pk} lost its lock")
        if not Job.objects.filter(pk=self.job.pk, state=Job.State.RUNNING).exists():
            raise JobCancelled

    def save(self, *, done: int, total: int | None, progress: dict[str, Any], force: bool = False) -> None:
        """Record progress; between forced saves, at most every SAVE_EVERY_S (a DB write costs ~2 ms)."""
        if not force and not self.due():
            return
        self._saved_at = self._checked_at = time.monotonic()
        now = timezone.now()
        values = {"done": done, "total": total, "progress": progress, "updated_at": now}
        saved = Job.objects.filter(pk=self.job.pk, state=Job.State.RUNNING).update(**values)
        self.job.done, self.job.total, self.job.progress = done, total, progress
        if not saved:
            # Cancelled meanwhile: keep the numbers, leave the state alone. The body stops right
            # after this save, so these numbers are the whole truth for a later resume.
            Job.objects.filter(pk=self.job.pk).update(**{**values, "progress": {**progress, self.SETTLED: True}})
            raise JobCancelled
        try:
            if self.lock_lost.is_set():
                raise locks.LockError("the heartbeat could not renew the lock")
            self.lock.reacquire()
        except locks.LockError as exc:
            # The lock expired and may be someone else's now: stop rather than run twice.
            raise JobBusy(f"job {self.job.pk} lost its lock") from exc
        job_broadcast(self.job)

    def note(self, text: str) -> None:
        """A remark on a job that otherwise succeeded (shown as its ``error``)."""
        self.notes.append(text)


KindBody = Callable[[Job, Progress], None]
_bodies: dict[str, KindBody] = {}


def kinds_register(bodies: Mapping[str, KindBody]) -> None:
    """Give the runner the body of each kind (see the module docstring for who calls this, and why)."""
    unknown = sorted(set(bodies) - set(KINDS))
    if unknown:
        raise ValueError(f"not job kinds: {', '.join(unknown)} (add them to KINDS)")
    _bodies.update(bodies)


def job_run(job_id: int) -> Job | None:
    """Run (or continue) job ``job_id`` to its end; see the module docstring for the guarantees.

    Raises :class:`JobBusy` when another worker holds the job, and :class:`Unreachable` when the
    monitored Redis cannot be reached (the job stays running; the task retries). Any other failure
    marks the job failed with the reason.
    """
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        log.warning("job %s does not exist (deleted?): nothing to run", job_id)
        return None
    if job.is_finished:
        return job
    lock = _job_lock(job_id)
    if not lock.acquire(blocking=False):
        raise JobBusy(f"job {job_id} is being run by another worker")
    try:
        if job.kind not in READ_ONLY_KINDS and read_only_blocked():
            return _refuse_locked(job_id)
        return _run_locked(job_id, lock)
    finally:
        with contextlib.suppress(locks.LockError):  # expired meanwhile: nothing to release
            lock.release()


def _refuse(job_id: int) -> None:
    """End a job a read-only process will not run, under its lock (a live holder keeps it: skip)."""
    lock = _job_lock(job_id)
    if not lock.acquire(blocking=False):
        log.info("job %s is held by a worker: not refused now", job_id)
        return
    try:
        _refuse_locked(job_id)
    finally:
        with contextlib.suppress(locks.LockError):
            lock.release()


def _refuse_locked(job_id: int) -> Job:
    """Mark a queued or running job failed with :data:`READ_ONLY_REFUSAL` and one ``denied`` audit row.

    Only the call that changes the state writes the row, so a job refused by several processes (a
    redelivered task, two beats) still has one.
    """
    now = timezone.now()
    with transaction.atomic():  # the refusal and its row appear together
        changed = Job.objects.filter(pk=job_id, state__in=[Job.State.QUEUED, Job.State.RUNNING]).update(
            state=Job.State.FAILED, error=READ_ONLY_REFUSAL, finished_at=now, updated_at=now
        )
        job = Job.objects.get(pk=job_id)
        if changed:
            _finished_audit(job, time.monotonic(), outcome=AuditEvent.Outcome.DENIED)
    if changed:
        log.warning("job %s refused: this process is read-only", job_id)
        job_broadcast(job, force=True)
    return job


def _run_locked(job_id: int, lock: locks.RenewableLock) -> Job:
    job = Job.objects.get(pk=job_id)
    if job.is_finished:  # finished between the first look and the lock
        return job
    body = _bodies.get(job.kind)
    now = timezone.now()
    Job.objects.filter(pk=job_id).update(
        state=Job.State.RUNNING, started_at=job.started_at or now, error="", updated_at=now
    )
    job.refresh_from_db()
    job_broadcast(job, force=True)
    started = time.monotonic()
    progress = Progress(job, lock)
    try:
        if body is None:
            raise InvalidArgument(f"Unknown job kind {job.kind!r}.")
        with _heartbeat(progress):
            body(job, progress)
    except JobCancelled:
        job.refresh_from_db()
        _finished_audit(job, started)
        return job
    except (JobBusy, SoftTimeLimitExceeded):
        raise  # the task tries again later / continues in a fresh task: the job goes on
    except Unreachable as exc:
        Job.objects.filter(pk=job_id).update(error=f"Waiting to retry: {exc.message}", updated_at=timezone.now())
        raise
    except OpsError as exc:
        _finish(job, Job.State.FAILED, error=exc.message, started=started)
    except Exception as exc:
        log.exception("job %s failed", job_id)
        _finish(job, Job.State.FAILED, error=f"{type(exc).__name__}: {exc}", started=started)
    else:
        _finish(job, Job.State.DONE, error=" ".join(progress.notes), started=started)
    return job


def _finish(job: Job, state: str, *, error: str = "", started: float) -> None:
    """End the job and write its audit row in one transaction: whoever sees the end sees the row."""
    now = timezone.now()
    with transaction.atomic():
        # Only a job still running is finished here: a cancel that came in meanwhile wins.
        Job.objects.filter(pk=job.pk, state=Job.State.RUNNING).update(
            state=state, error=error[:4000], finished_at=now, updated_at=now
        )
        job.refresh_from_db()
        _finished_audit(job, started)
    job_broadcast(job, force=True)


def _finished_audit(job: Job, started: float, *, outcome: str | None = None) -> None:
    """One audit row saying what the job changed in the end (its start was audited when requested);
    a search job's entries left out as too costly to evaluate (its progress's ``too_costly``) too, a
    cancelled or failed one's included (only a done job's note says so in ``error``)."""
    key = bytes.fromhex(job.parameters.get("key", ""))
    params: dict[str, Any] = {"job": job.pk, "state": job.state, "total": job.total}
    if costly := (job.progress or {}).get("too_costly"):
        params["too_costly"] = costly
    recorded = (job.progress or {}).get("audit")
    if isinstance(recorded, dict):  # what the kind recorded for the trail: the IDs it moved, and when
        params.update(recorded)
    if outcome is None:
        outcome = AuditEvent.Outcome.ERROR if job.state == Job.State.FAILED else AuditEvent.Outcome.OK
    try:
        with transaction.atomic():  # a savepoint: a failed row never spoils the job's own update
            audit_write_system(
                user=job.created_by,
                conn=job.connection,
                action=f"{job.kind}.finished",
                stream=key or None,
                params=params,
                outcome=outcome,
                error=job.error,
                affected=job.done,
                duration_ms=round((time.monotonic() - started) * 1000),
            )
    except Exception:  # the job's own record is what matters; never fail it over the trail
        log.exception("could not write the audit row of job %s", job.pk)


# ---------------------------------------------------------------------- locks, heartbeat, broadcast


def _job_lock(job_id: int) -> locks.RenewableLock:
    return locks.renewable_lock(f"job-lock:{job_id}", timeout_s=settings.BUSCONSOLE_JOB_LOCK_S)


def _heartbeat_every() -> float:
    """:data:`HEARTBEAT_S`, or a third of the lock's expiry or of the stalled threshold when shorter,
    so that neither runs out between two beats of a live worker."""
    return max(0.01, min(HEARTBEAT_S, settings.BUSCONSOLE_JOB_LOCK_S / 3, settings.BUSCONSOLE_JOB_STALLED_S / 3))


@contextlib.contextmanager
def _heartbeat(progress: Progress) -> Iterator[None]:
    """While the block runs, renew the job's lock and touch its ``updated_at`` from a thread.

    Batches save progress as they end, but one batch may take long (a big Lua call, a slow server, a
    Spark step); the beat says "alive" regardless, so only a dead worker falls silent. A lock that
    could not be renewed is flagged on ``progress`` (the body stops at its next save) and ends the
    beat: whoever holds the lock now beats for the job.
    """
    stop = threading.Event()
    every = _heartbeat_every()
    job_id = progress.job.pk

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    progress.lock.reacquire()
                except locks.LockError:
                    progress.lock_lost.set()
                    return
                except Exception:  # the console's Redis hiccupped: the next beat tries again
                    log.warning("job %s: heartbeat could not renew its lock", job_id, exc_info=True)
                    continue
                try:
                    Job.objects.filter(pk=job_id, state=Job.State.RUNNING).update(updated_at=timezone.now())
                except Exception:  # the database is busy: the next beat tries again
                    log.warning("job %s: heartbeat could not touch the job", job_id, exc_info=True)
        finally:
            connections.close_all()  # this thread's own database connections

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(every + 10)


_last_broadcast: dict[int, float] = {}


def job_broadcast(job: Job, *, force: bool = False) -> None:
    """Tell live pages about ``job`` (``{"type": "job.progress", ...}``): best effort, throttled.

    The event is small (the API's job shape), as the channel layer should only carry control
    events; a page that misses one catches up from the next or by polling the job.
    """
    now = time.monotonic()
    if not force and now - _last_broadcast.get(job.pk, 0.0) < BROADCAST_EVERY_S:
        return
    _last_broadcast[job.pk] = now
    if job.is_finished:
        _last_broadcast.pop(job.pk, None)
    api = job.to_api()
    key_hex = (job.parameters or {}).get("key")
    # To the job's watchers and to the open pages of the stream it works on (never raises).
    broadcast.job_progress(
        job.pk, state=api["state"], done=api["done"], total=api["total"], error=api["error"], kind=api["kind"],
        conn=job.connection or None, key=bytes.fromhex(key_hex) if key_hex else None,
    )
