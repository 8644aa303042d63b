"""``tests.console.redis_ops.test_dlq_bulk_requeue`` rerun on Valkey (tests/valkey/rerun.py): bulk DLQ
requeue (Lua, batched)."""

from tests.valkey.rerun import rerun

rerun("tests.console.redis_ops.test_dlq_bulk_requeue", globals())
