"""The console's own Redis (``REDIS_URL``) on Sentinel: the shape each of its clients takes it in.

``REDIS_URL`` may be a ``redis+sentinel://`` URL (:mod:`eventbus.sentinel` reads it). The console's own
Redis has four kinds of client, and each library takes Sentinel its own way, so the settings hand each
the shape it reads, all from the one URL:

- Celery (kombu's Sentinel transport): a broker URL naming every sentinel as
  ``sentinel://[user:password@]host:port/<db>``, joined by ``;``, with the service as the
  ``master_name`` transport option and the sentinels' own login as ``sentinel_kwargs``;
- the channel layer (channels-redis): one host given as ``sentinels`` and ``master_name``, with the
  primary's database and login beside them;
- Django's cache: the URL itself, with :class:`eventbus.sentinel.SentinelPool` as the pool class and
  the location as a one-item list (Django cuts a string location at its commas);
- the locks, the login throttle and ``/readyz`` (:mod:`busconsole.locks`):
  :func:`eventbus.sentinel.client_from_url`.

Each of them asks the sentinels for the primary when it opens a connection, so each follows a failover
once its connection to the old primary breaks. ``rediss+sentinel://`` gives every one of them TLS to the
sentinels and to the primary, with the URL's ``ssl_*`` parameters.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from eventbus.sentinel import SentinelUrl, parse, sentinel_options

#: redis-py's pool class for Django's cache (``OPTIONS["pool_class"]``; its ``LOCATION`` is ``[REDIS_URL]``).
CACHE_POOL_CLASS = "eventbus.sentinel.SentinelPool"


def _login(url: SentinelUrl) -> str:
    if url.username is None and url.password is None:
        return ""
    user = quote(url.username or "", safe="")
    return user + (":" + quote(url.password, safe="") if url.password is not None else "") + "@"


def _sentinel_kwargs(url: SentinelUrl) -> dict[str, Any]:
    return sentinel_options(url, {})


def celery_broker(raw: str) -> tuple[str, dict[str, Any]]:
    """kombu's broker URL for ``raw`` and the transport options it needs (``master_name``, ``sentinel_kwargs``)."""
    url = parse(raw)
    login = _login(url)
    hosts = ";".join(f"sentinel://{login}{f'[{h}]' if ':' in h else h}:{p}/{url.db}" for h, p in url.sentinels)
    return hosts, {"master_name": url.service, "sentinel_kwargs": _sentinel_kwargs(url)}


def celery_ssl(raw: str) -> dict[str, Any] | None:
    """``broker_use_ssl`` for ``raw``: the primary's TLS options, None without TLS."""
    return dict(parse(raw).tls or {}) or None


def channel_layer_host(raw: str) -> dict[str, Any]:
    """channels-redis's host entry for ``raw``: the sentinels, the service, the primary's db, login and TLS."""
    url = parse(raw)
    host: dict[str, Any] = {
        "sentinels": [list(address) for address in url.sentinels],
        "master_name": url.service,
        "sentinel_kwargs": _sentinel_kwargs(url),
        "db": url.db,
    }
    if url.username is not None:
        host["username"] = url.username
    if url.password is not None:
        host["password"] = url.password
    if url.tls:
        host.update(url.tls, ssl=True)
    return host
