"""``tests.console.redis_ops.test_claims`` rerun on Valkey (tests/valkey/rerun.py): xCLAIM and XAUTOCLAIM
(the deleted-IDs element), ack counts."""

from tests.valkey.rerun import rerun

rerun("tests.console.redis_ops.test_claims", globals())
