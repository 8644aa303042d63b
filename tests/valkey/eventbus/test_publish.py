"""``tests.eventbus.test_publish`` rerun on Valkey (tests/valkey/rerun.py): the bus's publish."""

from tests.valkey.rerun import rerun

rerun("tests.eventbus.test_publish", globals())
