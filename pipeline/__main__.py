"""``python -m pipeline --lake <uri> ...``: the rollup jobs (see :mod:`pipeline.main`)."""

import sys

from pipeline.main import main

sys.exit(main())
