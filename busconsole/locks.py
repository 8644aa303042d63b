"""Locks on the console's own Redis (REDIS_URL), the one place that builds a client for them.

Two kinds, for two needs:

- :func:`lock_held`: ``SET NX PX`` for the length of a block, released only if still ours. Beat tasks
  (docs/architecture.md#celery: exactly one beat runs, and a run never overlaps the next) and one-at-a-time work
  (evaluating a tick's alerts, posting one alert's webhook) take it; it expires by itself, so a killed
  worker never wedges anything.
- :func:`renewable_lock`: redis-py's lock, for work longer than any fixed expiry (a background job), whose
  holder renews it as it makes progress; :func:`renewed_lock` holds one for a block and renews it from a
  heartbeat thread (a metric snapshot or mirror sync whose length grows with the number of streams).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis
from django.conf import settings

from eventbus.sentinel import client_from_url
from eventbus.tls import tls_options

log = logging.getLogger(__name__)

_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

RenewableLock = redis.lock.Lock
"""What :func:`renewable_lock` returns: ``acquire(blocking=False)``, ``reacquire()``, ``release()``."""
LockError = redis.exceptions.LockError
"""Raised by ``reacquire()`` or ``release()`` of a :data:`RenewableLock` that expired meanwhile."""


def console_redis() -> redis.Redis:
    """The console's own Redis (REDIS_URL), built on first use (per URL: tests point it elsewhere)."""
    url = settings.REDIS_URL
    client = _clients.get(url)
    if client is None:
        with _clients_lock:
            client = _clients.get(url)
            if client is None:
                # a redis+sentinel:// REDIS_URL gets the primary its sentinels name (eventbus/sentinel.py)
                client = client_from_url(url, socket_timeout=5, socket_connect_timeout=2, **tls_options(url))
                _clients[url] = client
    return client


@contextmanager
def lock_held(*, name: str, ttl_ms: int) -> Iterator[bool]:
    """``SET busconsole:lock:<name> <token> NX PX ttl_ms`` for the block; yields whether it was acquired.

    Released at the end of the block only if it is still ours (compare-and-delete): a holder that
    outlived ``ttl_ms`` must not release the lock of the run that took over.
    """
    key = f"busconsole:lock:{name}"
    token = secrets.token_hex(16)
    client = console_redis()
    acquired = bool(client.set(key, token, nx=True, px=max(1, ttl_ms)))
    try:
        yield acquired
    finally:
        if acquired:
            try:
                client.eval(_RELEASE, 1, key, token)
            except redis.RedisError as exc:  # it expires anyway
                log.warning("could not release lock %s: %s", key, exc)


def interval_lock_ms(interval_s: float) -> int:
    """A lock that is shorter than the interval, so a stuck holder costs at most one run."""
    return max(100, int(interval_s * 900))


def renewable_lock(name: str, *, timeout_s: float) -> RenewableLock:
    """A non-blocking lock ``busconsole:<name>`` that expires ``timeout_s`` after its last renewal.

    ``thread_local=False``: the holder may renew it from a heartbeat thread.
    """
    return console_redis().lock(f"busconsole:{name}", timeout=timeout_s, blocking=False, thread_local=False)


@dataclass
class HeldLock:
    """What :func:`renewed_lock` yields: whether the lock was taken, and whether a renewal failed since."""

    acquired: bool
    lost: threading.Event = field(default_factory=threading.Event)


@contextmanager
def renewed_lock(name: str, *, timeout_s: float) -> Iterator[HeldLock]:
    """Take ``busconsole:<name>`` without waiting and keep it for the block, however long the block runs.

    A daemon thread renews it every ``timeout_s / 3`` seconds, so the lock outlives a run that takes
    longer than expected (never two runs at once), while a killed run's lock expires ``timeout_s`` after
    its last renewal. A renewal that fails (the lock expired while the process was frozen, say, and
    another run may hold it now) sets ``lost``: the holder should stop at its next step. The lock is
    released at the end if it is still ours.
    """
    lock = renewable_lock(name, timeout_s=timeout_s)
    held = HeldLock(acquired=bool(lock.acquire(blocking=False)))
    if not held.acquired:
        yield held
        return
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(timeout_s / 3):
            try:
                lock.reacquire()
            except (LockError, redis.RedisError) as exc:
                log.warning("lock %s could not be renewed: %s", name, exc)
                held.lost.set()
                return

    thread = threading.Thread(target=heartbeat, name=f"lock-heartbeat:{name}", daemon=True)
    thread.start()
    try:
        yield held
    finally:
        stop.set()
        thread.join(timeout_s)
        with contextlib.suppress(LockError, redis.RedisError):  # expired or unreachable: it expires anyway
            lock.release()
