"""``tests.console.live.test_tail_delivery`` rerun on Valkey (tests/valkey/rerun.py): the live tail over a
real websocket."""

from tests.valkey.rerun import rerun

rerun("tests.console.live.test_tail_delivery", globals())
