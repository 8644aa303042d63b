"""Settings for busconsole, all read from environment variables with working defaults.

See docs/operations.md#settings for the variables. Development defaults apply only with DEBUG=1 (the
default); a production process (DEBUG=0) refuses to start without SECRET_KEY.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from busconsole import sentinel as console_sentinel
from busconsole.env import (
    PRIVATE_PORT,
    PRIVATE_PORT_VARIABLE,
    checked_redis_url,
    envbool,
    envint,
    envlist,
    envnetworks,
    envstr,
    parse_connections,
    parse_family_delimiter,
    parse_mask_rules,
    parse_stream_families,
    parse_unmasked_roles,
)
from eventbus.sentinel import is_sentinel
from eventbus.tls import tls_options, without_tls
from pipeline import conf as _spark_conf  # no pyspark: parses BUSCONSOLE_SPARK_CONF
from streams_app.accounts.ldap_config import ldap_settings_from_env  # Django-free: parses BUSCONSOLE_LDAP_*
from streams_app.accounts.oidc_config import oidc_settings_from_env  # Django-free: parses BUSCONSOLE_OIDC_*

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("BUSCONSOLE_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = envbool("DEBUG", True)

SECRET_KEY = envstr("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG=0")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
# Needed only when the browser's origin differs from the Host the console sees (a proxy that does not pass
# Host on, or another port); each entry is an origin with its scheme. uvicorn runs no system checks, so one
# without a scheme would be accepted silently and match nothing (every login refused by CSRF): refused here.
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
if _unschemed := [o for o in CSRF_TRUSTED_ORIGINS if not o.startswith(("http://", "https://"))]:
    raise ImproperlyConfigured(
        f"CSRF_TRUSTED_ORIGINS entries need a scheme (https://console.example.com), not {', '.join(map(repr, _unschemed))}"
    )
# A proxy that sends its upstream's name as Host and the public name as X-Forwarded-Host; off by default, as
# without such a proxy the client would choose the host (deploy/nginx/busconsole.conf passes Host on instead).
USE_X_FORWARDED_HOST = envbool("USE_X_FORWARDED_HOST", False)
CSRF_FAILURE_VIEW = "streams_app.views.errors.csrf_failure"  # JSON for the API (docs/api.md#errors)

# The private Redis that `make run` and the test suite start listen on this port by default.
PRIVATE_REDIS_PORT = envint(PRIVATE_PORT_VARIABLE, PRIVATE_PORT)
_private_redis = f"redis://127.0.0.1:{PRIVATE_REDIS_PORT}"

BUS_REDIS_URL = envstr("BUS_REDIS_URL", f"{_private_redis}/0")
BUS_REDIS_URLS = parse_connections(envstr("BUS_REDIS_URLS", f"default={BUS_REDIS_URL}"))
REDIS_URL = checked_redis_url("REDIS_URL", envstr("REDIS_URL", f"{_private_redis}/1"))
# TLS to the console's own Redis is set on REDIS_URL (rediss://, ssl_* parameters; eventbus/tls.py) and handed
# to each of its clients as the same options: redis-py 5 checks no host name unless told (nor does kombu,
# which connects unverified to a bare rediss:// URL), and the cache and the channel layer take options beside
# the URL. The broker gets the URL without them, so that only these options count.
REDIS_TLS = tls_options(REDIS_URL)

BUSCONSOLE_READ_ONLY = envbool("BUSCONSOLE_READ_ONLY", False)
BUSCONSOLE_DLQ_PATTERNS = envstr("BUSCONSOLE_DLQ_PATTERNS", "")
# DLQ triage (streams_app/triage): the newest dead letters one count reads at most (the page says "of M");
# bench/dlq_triage.py measures the page at this bound.
BUSCONSOLE_DLQ_TRIAGE_LIMIT = envint("BUSCONSOLE_DLQ_TRIAGE_LIMIT", 10000)
if not 1 <= BUSCONSOLE_DLQ_TRIAGE_LIMIT <= 200000:
    raise ImproperlyConfigured(f"BUSCONSOLE_DLQ_TRIAGE_LIMIT must be 1 to 200000, not {BUSCONSOLE_DLQ_TRIAGE_LIMIT}")
# Masking of payload values (streams_app/masking): JSON list of {"stream": glob, "field": path, "action":
# "mask"|"hash"|"remove"}, refused at start-up when malformed; more rules live on the admin page. The roles
# listed in BUSCONSOLE_UNMASKED_ROLES may reveal masked values page by page (?unmasked=1), audited.
BUSCONSOLE_MASK_RULES = parse_mask_rules(envstr("BUSCONSOLE_MASK_RULES", ""))
BUSCONSOLE_UNMASKED_ROLES = parse_unmasked_roles(envlist("BUSCONSOLE_UNMASKED_ROLES", ["admin"]))
# Seconds a socket to a monitored Redis may wait before the request fails with a clear error.
BUSCONSOLE_REDIS_TIMEOUT = float(envint("BUSCONSOLE_REDIS_TIMEOUT_MS", 5000)) / 1000
# How many keys one streams-list page may SCAN before it stops and hands back a cursor.
BUSCONSOLE_SCAN_BUDGET = envint("BUSCONSOLE_SCAN_BUDGET", 20000)
# Stream families (docs/operations.md#stream-families): configured globs, a JSON list of "glob" or {"name", "match"},
# refused at start-up when malformed; the rest are detected by cutting keys at the delimiter. The families
# page reads at most BUSCONSOLE_FAMILY_SCAN_BUDGET keys per pass and says "looked at N of M" beyond it.
BUSCONSOLE_STREAM_FAMILIES = parse_stream_families(envstr("BUSCONSOLE_STREAM_FAMILIES", ""))
BUSCONSOLE_FAMILY_DELIMITER = parse_family_delimiter(envstr("BUSCONSOLE_FAMILY_DELIMITER", ":"))
BUSCONSOLE_FAMILY_SCAN_BUDGET = envint("BUSCONSOLE_FAMILY_SCAN_BUDGET", 20000)
if not 1000 <= BUSCONSOLE_FAMILY_SCAN_BUDGET <= 10_000_000:
    raise ImproperlyConfigured(
        f"BUSCONSOLE_FAMILY_SCAN_BUDGET must be 1000 to 10000000, not {BUSCONSOLE_FAMILY_SCAN_BUDGET}"
    )
# Above this many keys a connection is in family mode: the snapshot keeps per-family rows and per-stream rows
# only for the members that matter, and the streams page lists families (docs/operations.md#stream-families).
BUSCONSOLE_FAMILY_MODE_KEYS = envint("BUSCONSOLE_FAMILY_MODE_KEYS", 50000)
# In family mode each snapshot tick goes on with a rolling family pass for at most TICK_KEYS stream keys (so a
# tick's cost does not grow with the key count), and reads the per-stream figures of at most MEMBERS_MAX members.
BUSCONSOLE_FAMILY_TICK_KEYS = envint("BUSCONSOLE_FAMILY_TICK_KEYS", 50000)
BUSCONSOLE_FAMILY_MEMBERS_MAX = envint("BUSCONSOLE_FAMILY_MEMBERS_MAX", 1000)
if BUSCONSOLE_FAMILY_MODE_KEYS < 0 or BUSCONSOLE_FAMILY_TICK_KEYS < 1 or BUSCONSOLE_FAMILY_MEMBERS_MAX < 0:
    raise ImproperlyConfigured(
        "BUSCONSOLE_FAMILY_MODE_KEYS and BUSCONSOLE_FAMILY_MEMBERS_MAX must be >= 0, BUSCONSOLE_FAMILY_TICK_KEYS >= 1"
    )
# Characters of the payload preview a pending row or a dead letter's row shows (page and API), ellipsis included.
BUSCONSOLE_PREVIEW_CHARS = envint("BUSCONSOLE_PREVIEW_CHARS", 80)
if not 8 <= BUSCONSOLE_PREVIEW_CHARS <= 1000:
    raise ImproperlyConfigured(f"BUSCONSOLE_PREVIEW_CHARS must be 8 to 1000, not {BUSCONSOLE_PREVIEW_CHARS}")
# Bytes of field names and values one entry added from the console may hold (the "Add entry" form and API).
BUSCONSOLE_ENTRY_MAX_BYTES = envint("BUSCONSOLE_ENTRY_MAX_BYTES", 1048576)
# Live tail (streams_app/live/hub.py): per-client queue, reconnect replay cap, XREAD BLOCK, and how long
# a stream's reader may stay behind before it jumps to the newest entry.
BUSCONSOLE_TAIL_QUEUE = envint("BUSCONSOLE_TAIL_QUEUE", 500)
BUSCONSOLE_TAIL_REPLAY_MAX = envint("BUSCONSOLE_TAIL_REPLAY_MAX", 1000)
BUSCONSOLE_TAIL_BLOCK_MS = envint("BUSCONSOLE_TAIL_BLOCK_MS", 2000)
BUSCONSOLE_TAIL_MAX_LAG_MS = envint("BUSCONSOLE_TAIL_MAX_LAG_MS", 1000)
# The share of a web process's time its tail readers may spend handing entries out (percent), and the
# longest they wait after a hand-out for that (streams_app/live/node_reader.py, "Pacing"): higher share,
# lower wait: lower latency with hundreds of clients, less of the process left for the rest.
BUSCONSOLE_TAIL_FANOUT_PERCENT = envint("BUSCONSOLE_TAIL_FANOUT_PERCENT", 80)
BUSCONSOLE_TAIL_PACE_MAX_MS = envint("BUSCONSOLE_TAIL_PACE_MAX_MS", 4)
if not 1 <= BUSCONSOLE_TAIL_FANOUT_PERCENT <= 100 or not 0 <= BUSCONSOLE_TAIL_PACE_MAX_MS <= 1000:
    raise ImproperlyConfigured("BUSCONSOLE_TAIL_FANOUT_PERCENT must be 1 to 100 and BUSCONSOLE_TAIL_PACE_MAX_MS "
                               f"0 to 1000, not {BUSCONSOLE_TAIL_FANOUT_PERCENT} and {BUSCONSOLE_TAIL_PACE_MAX_MS}")
# Redis Cluster: the BLOCK of the tail's one round trip over a node whose tailed keys span several slots.
BUSCONSOLE_TAIL_POLL_MS = envint("BUSCONSOLE_TAIL_POLL_MS", 10)
# Redis Cluster: the most tailed slots per node and process read by a blocked connection of their own;
# the slots beyond are polled every BUSCONSOLE_TAIL_POLL_MS (0: poll every slot).
BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE = envint("BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE", 64)
# Failed logins per username or client address within the window before logins are refused.
BUSCONSOLE_LOGIN_MAX_FAILURES = envint("BUSCONSOLE_LOGIN_MAX_FAILURES", 5)
BUSCONSOLE_LOGIN_WINDOW_S = envint("BUSCONSOLE_LOGIN_WINDOW_S", 900)
# Single sign-on (streams_app/accounts/oidc.py): an OpenID provider from BUSCONSOLE_OIDC_ISSUER, _CLIENT_ID,
# _CLIENT_SECRET, _SCOPES, _GROUPS_CLAIM, _ROLES ("admin=ops-admins,operator=ops;oncall,viewer=*") and _NAME, or
# None; refused at start-up when malformed. BUSCONSOLE_LOCAL_LOGIN=0 switches passwords off but for the
# BUSCONSOLE_BREAK_GLASS_USERS (usernames), for when the provider is down.
BUSCONSOLE_OIDC = oidc_settings_from_env()
BUSCONSOLE_LOCAL_LOGIN = envbool("BUSCONSOLE_LOCAL_LOGIN", True)
BUSCONSOLE_BREAK_GLASS_USERS = tuple(envlist("BUSCONSOLE_BREAK_GLASS_USERS", []))
# LDAP logins (streams_app/accounts/ldap_backend.py, django-auth-ldap from requirements-ldap.txt): a directory
# from BUSCONSOLE_LDAP_URI, _USER_BASE, _GROUP_BASE, _BIND_DN, _BIND_PASSWORD, _USER_FILTER, _GROUP_TYPE,
# _ROLES, _START_TLS and _CA_FILE, or None; refused at start-up when malformed.
BUSCONSOLE_LDAP = ldap_settings_from_env()
if not BUSCONSOLE_LOCAL_LOGIN and BUSCONSOLE_OIDC is None and BUSCONSOLE_LDAP is None:
    raise ImproperlyConfigured(
        "BUSCONSOLE_LOCAL_LOGIN=0 needs BUSCONSOLE_OIDC_ISSUER or BUSCONSOLE_LDAP_URI: nobody could log in"
    )
# Ranges alert webhooks may reach although loopback, private or link-local (on-premise receivers);
# empty: public addresses only (streams_app/alerts/egress.py).
BUSCONSOLE_WEBHOOK_ALLOW = envnetworks("BUSCONSOLE_WEBHOOK_ALLOW")

SPARK_MASTER = envstr("SPARK_MASTER", "local[*]")
# Spark options for the pipeline's runs, "key=value,key=value" (pipeline/conf.py): refused at start-up when malformed.
try:
    BUSCONSOLE_SPARK_CONF = _spark_conf.parse_list(envstr("BUSCONSOLE_SPARK_CONF", ""))
except _spark_conf.ConfError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None
BUSCONSOLE_LAKE = envstr("BUSCONSOLE_LAKE", str(VAR_DIR / "lake"))
# The resident Spark driver's socket (python -m pipeline.service, started by `make run`): pipeline runs
# go there when it answers, else to a fresh `python -m pipeline` child per run. Empty: always a child.
BUSCONSOLE_SPARK_SERVICE = envstr("BUSCONSOLE_SPARK_SERVICE", str(VAR_DIR / "spark.sock"))

INSTALLED_APPS = [
    "streams_app.admin_site.ConsoleAdminConfig",  # django.contrib.admin, entered by console admins
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "template_partials",
    "streams_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "streams_app.middleware.raw_path_middleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "streams_app.middleware.bearer_token_middleware",
    "streams_app.views.links.long_key_middleware",  # ~sha256:<hex> links of keys too long for a URL
    "streams_app.middleware.ConsoleLoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "streams_app.middleware.OpsErrorMiddleware",
    "streams_app.views.errors.method_not_allowed_middleware",  # Django's empty 405 -> JSON or a page
    "streams_app.views.errors.unknown_address_middleware",  # DEBUG's URL-list 404 -> the console's 404
]

ROOT_URLCONF = "busconsole.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "streams_app.context_processors.console",
            ],
        },
    },
]

WSGI_APPLICATION = "busconsole.wsgi.application"
ASGI_APPLICATION = "busconsole.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{VAR_DIR / 'busconsole.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Live-server and Celery tests run other processes against the test database: keep it in a file.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_busconsole.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # WAL: pages read while a snapshot, sync or retention writes (readers never wait for the writer, nor it
    # for them); NORMAL sync is safe with WAL (a power cut may lose the last commits, never corrupt).
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "busconsole",
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2, **REDIS_TLS},
    }
}

CHANNEL_LAYERS: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "streams_app.live.layer.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, **REDIS_TLS}], "prefix": "busconsole:asgi"},
    }
}

# ConsoleModelBackend logs people in (Django's ModelBackend, whose session user is read with its role);
# ConsoleAdminPermissions gives console admins (the admin group, superusers) their permissions in the
# Django admin (streams_app/admin_site.py says why the role, not is_staff).
AUTHENTICATION_BACKENDS = [
    "streams_app.accounts.role_backend.ConsoleModelBackend",
    "streams_app.accounts.backends.ConsoleAdminPermissions",
]
if BUSCONSOLE_LDAP is not None:
    if importlib.util.find_spec("django_auth_ldap") is None:
        raise ImproperlyConfigured(
            "BUSCONSOLE_LDAP_URI needs django-auth-ldap: pip install -r requirements-ldap.txt "
            "(it builds python-ldap: Debian's libldap2-dev and libsasl2-dev)"
        )
    AUTHENTICATION_BACKENDS.insert(1, "streams_app.accounts.ldap_backend.ConsoleLDAPBackend")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = envstr("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))  # collectstatic writes here
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Development serves static files straight from static/ (no collectstatic needed for `make run`).
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy (django-csp): scripts, styles and connections from this origin only; no inline
# script or style, no eval (htmx runs with allowEval off, see base.html). 'self' in connect-src also
# covers the websockets (ws:/wss: on the same host and port, CSP level 3). A page that needs more (a
# vendored API reference, say) widens its own policy with csp.decorators, never this one.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}
if BUSCONSOLE_OIDC is not None:
    # The login button's and the logout button's posts redirect to the provider, and Chromium holds a form's
    # redirects to form-action too.
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(BUSCONSOLE_OIDC.origin)
if not DEBUG:
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # Probes ask the web process itself over plain HTTP, without the proxy's header: answer them there.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

CELERY_BROKER_URL = without_tls(REDIS_URL)
CELERY_BROKER_USE_SSL = REDIS_TLS or None
CELERY_REDIS_BACKEND_USE_SSL = REDIS_TLS or None  # for a Redis result backend, should one be configured
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 3600)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
# A task still running when the broker's visibility timeout passes is delivered again: keep the timeout
# past the hard time limit, so only a task whose worker died is redelivered (jobs resume; see jobs.py).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 600)
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
if is_sentinel(REDIS_URL):
    # The console's own Redis through its sentinels: each client gets the shape it reads (busconsole/sentinel.py).
    CACHES["default"]["LOCATION"] = [REDIS_URL]  # a list: Django cuts a string location at its commas
    CACHES["default"]["OPTIONS"]["pool_class"] = console_sentinel.CACHE_POOL_CLASS
    CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [console_sentinel.channel_layer_host(REDIS_URL)]
    CELERY_BROKER_URL, _sentinel_transport = console_sentinel.celery_broker(REDIS_URL)
    CELERY_BROKER_TRANSPORT_OPTIONS.update(_sentinel_transport)
    CELERY_BROKER_USE_SSL = console_sentinel.celery_ssl(REDIS_URL)
# Two queues, each with workers of its own (busconsole/celery.py says why): the beat's upkeep of the bus
# (snapshots and the alerts they evaluate, the mirror sync, resuming stalled jobs, retention) and alert
# webhooks on one, background jobs on the other, so that no job can hold the worker a snapshot needs.
# Anything not routed (CELERY_TASK_ROUTES, at the end of this file) goes with the jobs.
BUSCONSOLE_BEAT_QUEUE = "busconsole-beat"
BUSCONSOLE_JOBS_QUEUE = "busconsole-jobs"
# Each queue on an exchange and routing key of its own. Celery sends a routed task straight to its queue
# either way; a Queue given only its name would be bound under the default queue's key, so a message sent
# to that exchange (by another client, a tool) would reach both queues.
CELERY_TASK_QUEUES = tuple(Queue(q, Exchange(q), routing_key=q) for q in (BUSCONSOLE_BEAT_QUEUE, BUSCONSOLE_JOBS_QUEUE))
CELERY_TASK_DEFAULT_QUEUE = BUSCONSOLE_JOBS_QUEUE
# Background jobs (streams_app.jobs.runner): a running job beats every few seconds (even inside a long
# batch), so one silent for STALLED_S is presumed dead (worker killed) and re-enqueued by the beat task,
# which looks every RESUME_EVERY_S; the per-job lock that keeps two workers off one job expires LOCK_S
# after its holder stopped renewing it, before the job counts as stalled, so the resumed run finds it free.
BUSCONSOLE_JOB_STALLED_S = envint("BUSCONSOLE_JOB_STALLED_S", 30)
BUSCONSOLE_JOB_LOCK_S = envint("BUSCONSOLE_JOB_LOCK_S", 20)
BUSCONSOLE_JOB_RESUME_EVERY_S = envint("BUSCONSOLE_JOB_RESUME_EVERY_S", 5)
if min(BUSCONSOLE_JOB_STALLED_S, BUSCONSOLE_JOB_LOCK_S, BUSCONSOLE_JOB_RESUME_EVERY_S) < 1:
    raise ImproperlyConfigured("BUSCONSOLE_JOB_STALLED_S, _LOCK_S and _RESUME_EVERY_S must be >= 1")
# Jobs one user may hold queued or running at once; one more is refused (409). With the default 1 and
# two job workers, no one user's jobs can hold every worker (streams_app.jobs.runner says why).
BUSCONSOLE_JOBS_PER_USER = envint("BUSCONSOLE_JOBS_PER_USER", 1)
if BUSCONSOLE_JOBS_PER_USER < 1:
    raise ImproperlyConfigured("BUSCONSOLE_JOBS_PER_USER must be >= 1")
# Metrics: snapshot every N seconds, mirror sync every M seconds; samples kept raw for
# RAW_H hours, as 1-minute rollups for 1M_D days, as 1-hour rollups for 1H_D days.
BUSCONSOLE_SNAPSHOT_INTERVAL_S = envint("BUSCONSOLE_SNAPSHOT_INTERVAL_S", 10)
BUSCONSOLE_MIRROR_INTERVAL_S = envint("BUSCONSOLE_MIRROR_INTERVAL_S", 30)
BUSCONSOLE_RETENTION_RAW_H = envint("BUSCONSOLE_RETENTION_RAW_H", 48)
BUSCONSOLE_RETENTION_1M_D = envint("BUSCONSOLE_RETENTION_1M_D", 14)
BUSCONSOLE_RETENTION_1H_D = envint("BUSCONSOLE_RETENTION_1H_D", 365)
if BUSCONSOLE_SNAPSHOT_INTERVAL_S < 1 or BUSCONSOLE_MIRROR_INTERVAL_S < 1:
    raise ImproperlyConfigured("BUSCONSOLE_SNAPSHOT_INTERVAL_S and BUSCONSOLE_MIRROR_INTERVAL_S must be >= 1")
if BUSCONSOLE_RETENTION_RAW_H < 2 or BUSCONSOLE_RETENTION_1M_D < 1 or BUSCONSOLE_RETENTION_1H_D < 1:
    # Charts of the last hour and less read the raw samples (series_resolution): keep at least two hours.
    raise ImproperlyConfigured("BUSCONSOLE_RETENTION_RAW_H must be >= 2 and the _1M_D/_1H_D retentions >= 1")
# The mirror sync is incremental (only streams whose facts changed are rewritten); a full pass, which also
# marks vanished streams deleted and refreshes every consumer's idle time, runs at most every FULL_EVERY_S.
BUSCONSOLE_MIRROR_FULL_EVERY_S = envint("BUSCONSOLE_MIRROR_FULL_EVERY_S", 300)
# A full pass goes through at most PASS_KEYS streams (and half the interval) per tick, going on from its
# SCAN cursor at the next tick; nothing is marked deleted until it has seen every key. 0: in one go.
BUSCONSOLE_MIRROR_PASS_KEYS = envint("BUSCONSOLE_MIRROR_PASS_KEYS", 20000)
if BUSCONSOLE_MIRROR_PASS_KEYS < 0:
    raise ImproperlyConfigured("BUSCONSOLE_MIRROR_PASS_KEYS must be >= 0")
# /metrics: aggregates per connection, plus per-object series for the TOP_N largest streams, the TOP_N groups
# with the most lag and with the most pending, the TOP_N deepest DLQs, and every stream matching an INCLUDE glob
# (Redis glob syntax, comma-separated), never one matching an EXCLUDE glob; at most MAX_SERIES per-object series
# in all (the exposition says how many it left out).
BUSCONSOLE_METRICS_TOP_N = envint("BUSCONSOLE_METRICS_TOP_N", 50)
BUSCONSOLE_METRICS_MAX_SERIES = envint("BUSCONSOLE_METRICS_MAX_SERIES", 2000)
BUSCONSOLE_METRICS_INCLUDE = envlist("BUSCONSOLE_METRICS_INCLUDE", [])
BUSCONSOLE_METRICS_EXCLUDE = envlist("BUSCONSOLE_METRICS_EXCLUDE", [])
if BUSCONSOLE_MIRROR_FULL_EVERY_S < 1 or BUSCONSOLE_METRICS_TOP_N < 0 or BUSCONSOLE_METRICS_MAX_SERIES < 0:
    raise ImproperlyConfigured("BUSCONSOLE_MIRROR_FULL_EVERY_S must be >= 1, the _METRICS_TOP_N/_MAX_SERIES >= 0")

# Exactly one beat process runs this schedule (busconsole/celery.py says why).
CELERY_BEAT_SCHEDULE: dict = {
    # pick up jobs whose worker died (docs/architecture.md#background-jobs: jobs must be resumable)
    "resume-stalled-jobs": {
        "task": "streams_app.tasks.resume_stalled_jobs",
        "schedule": float(BUSCONSOLE_JOB_RESUME_EVERY_S),
        "options": {"expires": float(BUSCONSOLE_JOB_RESUME_EVERY_S)},
    },
    # a snapshot or sync message not run within its interval is dropped; the next one takes over
    "metrics-snapshot": {
        "task": "streams_app.tasks.snapshot_tick",
        "schedule": float(BUSCONSOLE_SNAPSHOT_INTERVAL_S),
        "options": {"expires": float(BUSCONSOLE_SNAPSHOT_INTERVAL_S)},
    },
    "metrics-mirror-sync": {
        "task": "streams_app.tasks.mirror_sync_all",
        "schedule": float(BUSCONSOLE_MIRROR_INTERVAL_S),
        "options": {"expires": float(BUSCONSOLE_MIRROR_INTERVAL_S)},
    },
    "metrics-retention": {"task": "streams_app.tasks.samples_retention", "schedule": 60.0, "options": {"expires": 60.0}},
}

# The data pipeline: export + Spark rollups + load, as a background job on a beat schedule: a
# crontab "minute hour day-of-month month day-of-week" (UTC; default daily at 03:30) or, when set,
# every BUSCONSOLE_PIPELINE_INTERVAL_S seconds. Only the last MINUTE_HOURS hours of per-minute
# throughput are loaded into the database (the lake keeps them all).
BUSCONSOLE_PIPELINE_CRON = envstr("BUSCONSOLE_PIPELINE_CRON", "30 3 * * *")
BUSCONSOLE_PIPELINE_INTERVAL_S = envint("BUSCONSOLE_PIPELINE_INTERVAL_S", 0)
BUSCONSOLE_PIPELINE_MINUTE_HOURS = envint("BUSCONSOLE_PIPELINE_MINUTE_HOURS", 6)
# Processes exporting streams in parallel on big exports (0: one per core, at most 4).
BUSCONSOLE_EXPORT_WORKERS = envint("BUSCONSOLE_EXPORT_WORKERS", 0)

# Downloads of a range (streams_app.exports): who may export (viewer, operator, admin,
# or none to switch exports off for everyone), where background exports write their files and for how
# long they are kept, and the largest range served as a direct download (bigger ones need a job).
BUSCONSOLE_EXPORT_ROLE = envstr("BUSCONSOLE_EXPORT_ROLE", "viewer").strip().lower()
if BUSCONSOLE_EXPORT_ROLE not in ("viewer", "operator", "admin", "none"):
    raise ImproperlyConfigured(f"BUSCONSOLE_EXPORT_ROLE must be viewer, operator, admin or none, not {BUSCONSOLE_EXPORT_ROLE!r}")
BUSCONSOLE_EXPORT_DIR = envstr("BUSCONSOLE_EXPORT_DIR", str(VAR_DIR / "exports"))
BUSCONSOLE_EXPORT_RETENTION_H = envint("BUSCONSOLE_EXPORT_RETENTION_H", 24)
BUSCONSOLE_EXPORT_STREAM_MAX = envint("BUSCONSOLE_EXPORT_STREAM_MAX", 100_000)
# The longest a direct download's query may take at its cost bound (eventbus/search/cost.py); beyond it,
# a background export (cancellable, one per user).
BUSCONSOLE_EXPORT_STREAM_BUDGET_S = envint("BUSCONSOLE_EXPORT_STREAM_BUDGET_S", 30)
if BUSCONSOLE_EXPORT_RETENTION_H < 1 or BUSCONSOLE_EXPORT_STREAM_MAX < 1 or BUSCONSOLE_EXPORT_STREAM_BUDGET_S < 1:
    raise ImproperlyConfigured(
        "BUSCONSOLE_EXPORT_RETENTION_H, BUSCONSOLE_EXPORT_STREAM_MAX and BUSCONSOLE_EXPORT_STREAM_BUDGET_S must be >= 1"
    )


def _pipeline_schedule() -> object:
    if BUSCONSOLE_PIPELINE_INTERVAL_S > 0:
        return float(BUSCONSOLE_PIPELINE_INTERVAL_S)
    from celery.schedules import crontab

    fields = BUSCONSOLE_PIPELINE_CRON.split()
    if len(fields) != 5:
        raise ImproperlyConfigured(f"BUSCONSOLE_PIPELINE_CRON needs 5 fields, not {BUSCONSOLE_PIPELINE_CRON!r}")
    try:
        return crontab(fields[0], fields[1], day_of_month=fields[2], month_of_year=fields[3], day_of_week=fields[4])
    except ValueError as exc:
        raise ImproperlyConfigured(f"BUSCONSOLE_PIPELINE_CRON {BUSCONSOLE_PIPELINE_CRON!r}: {exc}") from None


CELERY_BEAT_SCHEDULE["run-pipeline"] = {"task": "streams_app.tasks.run_pipeline_scheduled", "schedule": _pipeline_schedule()}
# Every task of the schedule, and the alert webhooks, on the upkeep's queue; jobs (and the pipeline run
# the schedule starts, a job) on theirs. Built from the schedule, so a new periodic task cannot miss it.
CELERY_TASK_ROUTES = {
    **{entry["task"]: {"queue": BUSCONSOLE_BEAT_QUEUE} for entry in CELERY_BEAT_SCHEDULE.values()},
    "streams_app.tasks.alert_notify": {"queue": BUSCONSOLE_BEAT_QUEUE},
    "streams_app.tasks.run_job": {"queue": BUSCONSOLE_JOBS_QUEUE},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
}
