"""``tests.console.live.test_tail_resume`` rerun on Valkey (tests/valkey/rerun.py): the tail's resume after a
reconnect, with no gap and no duplicate."""

from tests.valkey.rerun import rerun

rerun("tests.console.live.test_tail_resume", globals())
