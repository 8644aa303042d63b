"""``tests.console.views.test_entries_page_rows`` rerun on Valkey (tests/valkey/rerun.py): the entries page's
rows and pager."""

from tests.valkey.rerun import rerun

rerun("tests.console.views.test_entries_page_rows", globals())
