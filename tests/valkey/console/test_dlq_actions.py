"""``tests.console.redis_ops.test_dlq_actions`` rerun on Valkey (tests/valkey/rerun.py): dLQ requeue by Lua
script for each convention, delete and purge."""

from tests.valkey.rerun import rerun

rerun("tests.console.redis_ops.test_dlq_actions", globals())
