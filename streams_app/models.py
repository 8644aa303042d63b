"""Every model of the console, imported from the feature package that owns it.

Django looks for an app's models in ``<app>.models``; each model lives beside the code that writes
it (see ``streams_app/README.md``). Import a model from its package, not from here.
"""

from __future__ import annotations

from streams_app.accounts.models import ApiToken, OidcIdentity
from streams_app.alerts.models import Alert, AlertRule
from streams_app.annotations.models import Annotation
from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from streams_app.lake.models import (
    AnomalyRollup,
    ErrorSignatureRollup,
    ExportCheckpoint,
    LagTrendRollup,
    LatencyRollup,
    PipelineRun,
    RetryRollup,
    ThroughputRollup,
)
from streams_app.masking.models import MaskRule
from streams_app.metrics.models import (
    ConsumerMirror,
    DlqSample,
    GroupMirror,
    GroupSample,
    MirrorState,
    RollupMark,
    SnapshotRun,
    SnapshotSkip,
    StreamMirror,
    StreamSample,
)
from streams_app.saved.models import SavedView

__all__ = [
    "Alert",
    "AlertRule",
    "Annotation",
    "AnomalyRollup",
    "ApiToken",
    "AuditEvent",
    "ConsumerMirror",
    "DlqSample",
    "ErrorSignatureRollup",
    "ExportCheckpoint",
    "GroupMirror",
    "GroupSample",
    "Job",
    "LagTrendRollup",
    "LatencyRollup",
    "MaskRule",
    "MirrorState",
    "OidcIdentity",
    "PipelineRun",
    "RetryRollup",
    "RollupMark",
    "SavedView",
    "SnapshotRun",
    "SnapshotSkip",
    "StreamMirror",
    "StreamSample",
    "ThroughputRollup",
]
