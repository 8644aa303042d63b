"""``tests.console.redis_ops.test_reads`` rerun on Valkey (tests/valkey/rerun.py): entries paging both ways,
pending and consumers as XINFO and XPENDING say, lag and entries-read."""

from tests.valkey.rerun import rerun

rerun("tests.console.redis_ops.test_reads", globals())
