"""DLQ triage: a DLQ's dead letters counted by error signature, by group and by origin stream, the filter
each count stands for, and the job that requeues exactly the dead letters a filter matches.

The Redis side (bounded pages of parsed, masked dead letters, the per-entry atomic requeue) is
:mod:`streams_app.redis_ops.actions.dlq`'s; the signature rule is :mod:`pipeline.signatures`', the one the
reports group dead letters by, so a signature here and on ``/reports/`` is the same string.
"""
