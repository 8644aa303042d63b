"""Live tail: the per-process hub that reads tailed streams, and the channel-layer plumbing.

- :mod:`.hub` holds, per ASGI process and monitored server, ONE blocking ``XREAD`` over every tailed
  stream and fans entries out to bounded per-client queues (the data path: never the channel layer).
- :mod:`.wire` writes the stream's shared frames straight to the sockets of clients that keep up;
  :mod:`.relay` hears a stream's operator events once per process and hands them to its tails.
- :mod:`.groups` is the one place that turns a stream key or a job id into a Channels group name.
- :mod:`.broadcast` lets sync code (views, Celery tasks) tell open tail pages that something changed.
"""
