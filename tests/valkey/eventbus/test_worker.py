"""``tests.eventbus.test_worker`` rerun on Valkey (tests/valkey/rerun.py): the bus's workers: consume, ack,
groups."""

from tests.valkey.rerun import rerun

rerun("tests.eventbus.test_worker", globals())
