"""``tests.console.services.test_groups`` rerun on Valkey (tests/valkey/rerun.py): claim, autoclaim, ack and
rewind through the pages and the API, each audited."""

from tests.valkey.rerun import rerun

rerun("tests.console.services.test_groups", globals())
