"""What keeps the hot paths fast by reaching under the standard tools: the process's heap kept out of the
cyclic collector's walks (:mod:`~streams_app.perf.heap`), and queries the ORM compiles once per process
(:mod:`~streams_app.perf.compiled`, on Django's private compiler, checked at start-up).

It imports nothing of the console, so any package may use it (the table in ``streams_app/README.md``).
"""
