"""The cluster suite: console and event bus tests against a real 3-primary Redis Cluster.

Uses the console's standing users and fixtures (``tests/console/conftest.py``) and the
``cluster``/``rc``/``on_cluster`` fixtures; each module covers one area where a cluster behaves
differently from one node (listings, actions, tail, jobs, export, the event bus).
"""

from tests.console.conftest import *  # noqa: F401,F403 - the console's users, clients and on_cluster
