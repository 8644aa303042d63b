"""The action layer: every change the console makes to a monitored Redis goes through here.

One place decides, for the HTML pages and the JSON API alike (docs/api.md#roles-and-the-audit-trail):

* who may do what (:data:`ACTION_ROLES`): checked here, where the action runs, so a hidden button is
  never the only thing between a viewer and a purge;
* that nothing changes while the console is read-only (``BUSCONSOLE_READ_ONLY=1``), for any role;
* that each attempt leaves exactly one :class:`~streams_app.models.AuditEvent`, whether it worked,
  failed or was refused, with how long it took and how many entries it changed.

Views validate input and call the ``<entity>_<verb>`` functions below; those call the access layer
(:mod:`streams_app.redis_ops.actions`) inside :func:`action_audit`. Long work (requeue of a whole DLQ,
replay of a range) becomes a :class:`~streams_app.models.Job` run by Celery (:mod:`streams_app.jobs.runner`).

The package is split by concern, and callers use it through this module only (``from streams_app
import services``; ``services.<entity>_<verb>(...)``): :mod:`.audit` holds the role table, read-only
check and audit row that every other module runs its calls through; :mod:`.groups` the pending-entry
and rewind actions; :mod:`.dlq` the dead-letter queues; :mod:`.replay` stream replays; :mod:`.job_control`
cancelling and resuming background jobs; :mod:`.pipeline` starting a data pipeline run; :mod:`.admin`
the admin deletions and trims; :mod:`.tokens` personal API tokens; :mod:`.alert_rules` the alert
rules; :mod:`.reveal` a response that shows masked values unmasked. To patch a name in a test, patch it in the submodule that uses it.
"""

from __future__ import annotations

from streams_app.audit.records import AUDIT_MAX_IDS, ActionRecord
from streams_app.services.admin import (
    consumer_delete,
    consumer_delete_preview,
    group_delete,
    stream_entries_delete,
    stream_entries_delete_preview,
    stream_trim,
    stream_trim_preview,
)
from streams_app.services.alert_rules import (
    alert_rule_authorize,
    alert_rule_create,
    alert_rule_delete,
    alert_rule_form_require,
    alert_rule_update,
    alert_rules_editable,
)
from streams_app.services.annotations import annotation_create
from streams_app.services.audit import (
    ACTION_ROLES,
    READ_ONLY_ALLOWED,
    action_attempt,
    action_audit,
    action_authorize,
    action_check,
    action_input,
    action_run,
)
from streams_app.services.dlq import (
    RequeueAllPreview,
    dlq_delete,
    dlq_purge,
    dlq_requeue,
    dlq_requeue_all,
    dlq_requeue_all_preview,
    dlq_require,
)
from streams_app.services.entries import entry_add, entry_add_action
from streams_app.services.exports import (
    ExportDownload,
    export_allowed,
    export_input,
    export_job_file,
    stream_export_download,
    stream_export_job,
)
from streams_app.services.groups import (
    SweepPreview,
    group_rewind,
    group_rewind_preview,
    pending_ack,
    pending_autoclaim,
    pending_autoclaim_preview,
    pending_claim,
)
from streams_app.services.job_control import job_cancel, job_cancel_action, job_resume
from streams_app.services.pipeline import pipeline_start
from streams_app.services.replay import ReplayPreview, stream_replay, stream_replay_count
from streams_app.services.retries import retry_act, retry_act_count, retry_list
from streams_app.services.reveal import payload_masker
from streams_app.services.saved_views import (
    saved_view_action,
    saved_view_delete,
    saved_view_may_delete,
    saved_view_name_clean,
    saved_view_rename,
    saved_view_save,
)
from streams_app.services.tokens import token_issue, token_revoke

__all__ = [
    # audit: roles, read-only mode, the audit row
    "ACTION_ROLES",
    "AUDIT_MAX_IDS",
    "READ_ONLY_ALLOWED",
    "ActionRecord",
    "action_attempt",
    "action_audit",
    "action_authorize",
    "action_check",
    "action_input",
    "action_run",
    # a response showing masked values unmasked, on the gate
    "payload_masker",
    # annotations on the charts and the timeline
    "annotation_create",
    # groups: pending entries and rewind
    "group_rewind",
    "group_rewind_preview",
    "pending_ack",
    "SweepPreview",
    "pending_autoclaim",
    "pending_autoclaim_preview",
    "pending_claim",
    # dlq
    "dlq_delete",
    "dlq_purge",
    "dlq_require",
    "dlq_requeue",
    "dlq_requeue_all",
    "dlq_requeue_all_preview",
    "RequeueAllPreview",
    # entries added by hand
    "entry_add",
    "entry_add_action",
    # replay
    "ReplayPreview",
    "stream_replay",
    "stream_replay_count",
    # the event bus's delayed retries
    "retry_act",
    "retry_act_count",
    "retry_list",
    # jobs
    "job_cancel",
    "job_cancel_action",
    "job_resume",
    # pipeline
    "pipeline_start",
    # admin
    "consumer_delete",
    "consumer_delete_preview",
    "group_delete",
    "stream_entries_delete",
    "stream_entries_delete_preview",
    "stream_trim",
    "stream_trim_preview",
    # saved views
    "saved_view_action",
    "saved_view_delete",
    "saved_view_may_delete",
    "saved_view_name_clean",
    "saved_view_rename",
    "saved_view_save",
    # exports
    "ExportDownload",
    "export_allowed",
    "export_input",
    "export_job_file",
    "stream_export_download",
    "stream_export_job",
    # tokens
    "token_issue",
    "token_revoke",
    # alert rules
    "alert_rule_authorize",
    "alert_rule_create",
    "alert_rule_delete",
    "alert_rule_form_require",
    "alert_rule_update",
    "alert_rules_editable",
]
