"""``tests.eventbus.test_retries`` rerun on Valkey (tests/valkey/rerun.py): the bus's retries and its DLQ."""

from tests.valkey.rerun import rerun

rerun("tests.eventbus.test_retries", globals())
