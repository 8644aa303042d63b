"""Read-side Redis access, one module per thing read.

:mod:`.streams` (list, rank by length, one stream's XINFO and its DLQs), :mod:`.entries` (pages,
single entries, batches by ID), :mod:`.groups` (groups and consumers, ordered and paged),
:mod:`.pending` (a group's pending entries), :mod:`.dlq` (the DLQs of a connection, a DLQ's entries
parsed by convention), :mod:`.server` (the overview's INFO facts, raw: the page writes them) and
:mod:`.limits` (page sizes, argument checks). Callers import the module that owns a read; nothing is
re-exported here.

Every function takes a connection name, talks to that server with a bounded number of round trips
(pipelines for per-stream facts, COUNT on every range) and returns frozen dataclasses. Nothing here
runs ``KEYS``, ``XRANGE - +`` or ``XINFO STREAM FULL``: on a big server those block Redis.

On a Redis Cluster the reads of one key go to its node (the cluster client routes them; pipelines of
several keys are split by node, never sent as one MULTI), and listings walk every primary. A listing
that could not reach every primary still answers with what it found and names the primaries it
missed (``missed``): the page or reply says it is partial rather than looking complete.
"""
