"""Command line: ``python -m eventbus {worker,publish,migrate,demo,list,inspect,groups,pending,dlq,stats,
requeue,claim,journey} ...``.

The operator's commands (``list`` ... ``journey``) are :mod:`eventbus.cli`.
Every command but ``worker`` uses ``--url``, else ``$BUS_REDIS_URL``, else db 0 of a local Redis
(``redis://127.0.0.1:$EVENTBUS_REDIS_PORT/0``, port :data:`~eventbus.connection.DEFAULT_PORT`, 6390, when
unset). ``worker`` uses the URL of the ``Bus`` it imports. When that Redis cannot
be reached (refused, unknown host, timed out) or refuses the login, the command prints one line naming
the URL (password masked) and what sets it, and exits with status 69 (see :mod:`eventbus.redis_errors`);
a URL that is no Redis URL, or names a database the server does not have, is such a line and status 2.
The options the commands share (``--url``, ``--json``, ``--dlq-patterns``, ``--log-level``) go before or
after the command (:data:`GLOBAL_OPTIONS`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from .bus import Bus
from .cli import add_commands
from .cli_reads import Shown
from .connection import DEFAULT_PORT, REDIS_ERRORS, database_missing, databases_of, url_problem
from .errors import DuplicateEvent
from .redis_errors import EXIT_UNAVAILABLE, explain, masked

URL_VARIABLE = "BUS_REDIS_URL"
PORT_VARIABLE = "EVENTBUS_REDIS_PORT"
DEFAULT_URL = f"redis://127.0.0.1:${PORT_VARIABLE}/0"
"""The default as the help shows it: :func:`_where` puts the port in."""

DESCRIPTION = """\
The event bus's command line: run workers, publish an event, move keys left
under pre-cluster names, run demo traffic; and look after the streams: list
streams, inspect entries, groups, pending entries, DLQs, stats, requeue dead
letters, claim pending entries, follow one event's journey (tables, or --json).

Redis: every command but worker connects to --url, else $BUS_REDIS_URL, else
redis://127.0.0.1:$EVENTBUS_REDIS_PORT/0 (port 6390 when unset): a local
Redis, as make run starts one. worker connects where the Bus it imports says.
Every command but worker waits at most $EVENTBUS_TIMEOUT_S (30) seconds for a
reply. TLS: a rediss:// URL with ssl_ca_certs, ssl_certfile, ssl_keyfile.
--url, --json, --dlq-patterns and --log-level go before or after the command.
"""

EXAMPLES = """\
examples:
  python -m eventbus worker app:bus --group billing --concurrency 16
  python -m eventbus publish orders order.created '{"order_id": 7}'
  BUS_REDIS_URL=redis://:secret@redis.internal:6379/0 python -m eventbus migrate orders
  python -m eventbus demo --url redis://localhost:6379/0
  python -m eventbus list
  python -m eventbus requeue '{orders}:dlq' --all --up-to 1700000000000-0 --json

exit status: 0 done; 1 refused (a duplicate event), nothing done or only part
of it (an ID missing or refused, nothing matched), or the key is not there;
2 bad arguments (a URL that is no Redis URL or names a database the server
lacks, or a $EVENTBUS_REDIS_PORT that is no port number);
69 Redis could not be reached or refused the login.
"""


class Unavailable(Exception):
    """Redis is not where the command looks: the one line to print."""


class BadSetting(Exception):
    """An environment variable the command reads holds no usable value: the one line to print."""


def load_bus(target: str) -> Bus:
    """Import ``module:attribute`` and return the :class:`Bus` it names."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"worker target must look like module:attribute, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    bus = getattr(importlib.import_module(module_name), attribute, None)
    if not isinstance(bus, Bus):
        raise SystemExit(f"{target} is not an eventbus.Bus")
    return bus


def _where(args: argparse.Namespace) -> tuple[str, str, str | None]:
    """The URL a command uses, what set it (the option, the variable, or nothing: the default), and
    what to do when no Redis answers there. A URL that names no Redis is :class:`BadSetting` (exit 2)."""
    for url, variable in ((args.url, "--url"), (os.environ.get(URL_VARIABLE), URL_VARIABLE)):
        if url:
            problem = url_problem(url)
            if problem:
                raise BadSetting(f"{masked(url)} ({variable}) {problem}")
            return url, variable, None
    fix = f"start it (make run), or set {URL_VARIABLE} or pass --url"
    raw = os.environ.get(PORT_VARIABLE, "").strip()
    if not raw:
        return f"redis://127.0.0.1:{DEFAULT_PORT}/0", "the default", fix
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise BadSetting(f"{PORT_VARIABLE} must be a port number, not {raw!r}")
    return f"redis://127.0.0.1:{int(raw)}/0", PORT_VARIABLE, fix


TIMEOUT_VARIABLE = "EVENTBUS_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 30.0


def _command_bus(url: str) -> Bus:
    """The Bus of a command other than ``worker``: each reply awaited at most ``$EVENTBUS_TIMEOUT_S``
    seconds (30 by default), the TLS handshake included, so a Redis that accepts and then stays silent
    is one line and exit 69, never a hang. A Bus's own default waits without end, as a blocking call
    (``request``) of an application may; no command here blocks."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        timeout = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        timeout = 0.0
    if not timeout > 0:
        raise BadSetting(f"{TIMEOUT_VARIABLE} must be a number of seconds above 0, not {raw!r}")
    return Bus.from_url(url, redis_kwargs={"socket_timeout": timeout})


def _reachable(bus: Bus, variable: str, fix: str | None = None) -> None:
    """PING once before the real work, so an absent Redis is one line now, not a traceback later."""
    try:
        bus.client.ping()
    except REDIS_ERRORS as exc:
        if database_missing(exc):  # the URL's fault, not the server's: a bad argument
            count = databases_of(bus.url)
            has = f"it has {count}, 0 to {count - 1}" if count else "see its databases setting"
            database = urlsplit(bus.url).path.strip("/")
            raise BadSetting(
                f"{masked(bus.url)} ({variable}) names database {database}, which that Redis does not have ({has})"
            ) from exc
        line = explain(exc, url=bus.url, variable=variable, fix=fix)
        if line is None:
            raise
        raise Unavailable(line) from exc


def _worker(args: argparse.Namespace) -> int:
    bus = load_bus(args.target)
    if os.environ.get(URL_VARIABLE) == bus.url:
        _reachable(bus, URL_VARIABLE)
    else:
        _reachable(
            bus, f"the URL of {args.target}", f"start Redis or change the URL {args.target} is built with"
        )
    config = {"lease_ms": args.lease_ms, "block_ms": args.block_ms, "shutdown_timeout": args.shutdown_timeout}
    if args.prefetch is not None:
        config["prefetch"] = args.prefetch
    bus.run(groups=args.group or None, concurrency=args.concurrency, **config)
    return 0


def _publish(args: argparse.Namespace) -> int:
    try:
        data = json.loads(args.data)
    except json.JSONDecodeError as exc:
        print(f"JSON payload is invalid: {exc}", file=sys.stderr)
        return 2
    url, variable, fix = _where(args)
    bus = _command_bus(url)
    try:
        _reachable(bus, variable, fix)
        print(
            bus.publish(
                args.stream, args.type, data, correlation_id=args.correlation_id, unique_key=args.unique_key
            )
        )
    except DuplicateEvent as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        bus.close()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from .migrate import migrate

    url, variable, fix = _where(args)
    bus = _command_bus(url)
    try:
        _reachable(bus, variable, fix)
        results = migrate(bus.client, args.streams or None)
    finally:
        bus.close()
    for done in results:
        print(
            f"{done.stream}: {done.retries} retries and {done.unique_keys} unique keys moved; "
            f"{done.old_dead_letters} dead letters left in the old DLQ (requeue them: requeue <old DLQ> --all)"
        )
    if not results:
        print("nothing to migrate: no retry or unique set under an old name")
    return 0


def _connect(args: argparse.Namespace) -> Bus:
    """The Bus of a screen command, its Redis answering (else :class:`Unavailable`: exit 69)."""
    url, variable, fix = _where(args)
    bus = _command_bus(url)
    try:
        _reachable(bus, variable, fix)
    except BaseException:
        bus.close()
        raise
    return bus


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    url, variable, fix = _where(args)
    bus = _command_bus(url)
    try:
        _reachable(bus, variable, fix)
    finally:
        bus.close()
    run_demo(url)
    return 0


LOG_LEVEL_HELP = "DEBUG, INFO, WARNING or ERROR (default: $EVENTBUS_LOG_LEVEL, else INFO)"
#: Options the commands share, taken before the command as well as after it (``--url URL list`` and
#: ``list --url URL``), as ``dest``: the flag. A command declares the ones it takes with
#: :func:`global_option`; one given before a command that does not take it is refused (exit 2).
GLOBAL_OPTIONS = {"url": "--url", "json": "--json", "dlq_patterns": "--dlq-patterns"}


def global_option(sub: argparse.ArgumentParser, flag: str, **options: object) -> None:
    """Add one of :data:`GLOBAL_OPTIONS` to a command. Its default is SUPPRESS: a command's parser
    writes every default it has over what the main parser read before the command, so without it
    ``--url URL list`` would lose the URL to ``list``'s default."""
    sub.add_argument(flag, default=argparse.SUPPRESS, **options)  # type: ignore[arg-type]  # options is a per-flag dict of add_argument's keywords, typed as a plain dict
    dest = flag.lstrip("-").replace("-", "_")
    sub.set_defaults(global_options=(*sub.get_default("global_options"), dest))


def _parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, examples: str
) -> argparse.ArgumentParser:
    sub = commands.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("--log-level", default=argparse.SUPPRESS, help=LOG_LEVEL_HELP)
    sub.set_defaults(global_options=())
    return sub


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eventbus",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", default=os.environ.get("EVENTBUS_LOG_LEVEL", "INFO"), help=LOG_LEVEL_HELP)
    url_help = f"Redis URL (default: ${URL_VARIABLE}, else {DEFAULT_URL}, port {DEFAULT_PORT} when unset)"
    parser.add_argument("--url", default=None, help=url_help + "; here or after the command")
    parser.add_argument("--json", action="store_true", help="screen commands: print one JSON document")
    parser.add_argument("--dlq-patterns", default=None, metavar="JSON", help="screen commands: DLQ conventions")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = _parser(
        commands,
        "worker",
        "run the handlers of a Bus until SIGTERM or SIGINT",
        "  python -m eventbus worker app:bus\n  python -m eventbus worker app:bus --group billing\n",
    )
    worker.add_argument("target", help="module:attribute of the Bus, e.g. app:bus")
    worker.add_argument("--group", action="append", help="consumer group to run (repeatable; default: all)")
    worker.add_argument("--concurrency", type=int, default=8, help="handlers run at once (default: 8)")
    worker.add_argument(
        "--prefetch", type=int, default=None, help="entries fetched ahead (default: concurrency)"
    )
    worker.add_argument(
        "--lease-ms",
        type=int,
        default=30_000,
        help="idle time after which other workers reclaim an entry (default: 30000)",
    )
    worker.add_argument("--block-ms", type=int, default=1_000, help="XREADGROUP BLOCK (default: 1000)")
    worker.add_argument(
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="seconds in-flight handlers get to finish on shutdown (default: 30)",
    )
    worker.set_defaults(func=_worker)

    publish = _parser(
        commands,
        "publish",
        "publish one event and print its entry ID",
        "  python -m eventbus publish orders order.created '{\"order_id\": 7}'\n"
        "  python -m eventbus publish --unique-key order-7 orders order.created '{}'\n",
    )
    global_option(publish, "--url", help=url_help)
    publish.add_argument("--correlation-id", help="correlation id carried by the event")
    publish.add_argument("--unique-key", help="refuse the event if one with this key was published recently")
    publish.add_argument("stream")
    publish.add_argument("type")
    # dest "data": "json" is the screen commands' --json flag, which a value here would seem to set
    publish.add_argument("data", metavar="json", help="the event data, as JSON")
    publish.set_defaults(func=_publish)

    migrate = _parser(
        commands,
        "migrate",
        "move retries and unique keys from the pre-cluster names (S:retry to {S}:retry)",
        "  python -m eventbus migrate\n  python -m eventbus migrate orders payments\n",
    )
    global_option(migrate, "--url", help=url_help)
    migrate.add_argument("streams", nargs="*", help="streams to migrate (default: every one found by SCAN)")
    migrate.set_defaults(func=_migrate)

    demo = _parser(
        commands,
        "demo",
        "run realistic demo traffic until SIGTERM or SIGINT",
        "  python -m eventbus demo --url redis://localhost:6379/0\n",
    )
    global_option(demo, "--url", help=url_help)
    demo.set_defaults(func=_demo)

    add_commands(commands, _parser, url_help, _connect, global_option)
    return parser


def main(
    argv: Sequence[str] | None = None, *, shown: Shown | None = None, journey_steps: Callable[[Any], Any] | None = None,
    dlq_patterns: tuple[str, str] | None = None,
) -> int:
    """Run one command. A program that embeds the command line passes its own settings and hooks:
    ``shown`` is what the commands may show of an entry (:data:`.cli_reads.Shown`: its masking rules; the
    bytes as stored when None), ``journey_steps`` (a :class:`eventbus.journey.Journey` in, the same with
    the operator actions it records added, out) for ``journey``, and ``dlq_patterns`` its configured DLQ
    conventions as (the setting's name, its JSON), used when ``--dlq-patterns`` is not given, in place
    of ``$EVENTBUS_DLQ_PATTERNS``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.shown = shown
    args.journey_steps = journey_steps
    args.patterns_setting = dlq_patterns
    for dest, flag in GLOBAL_OPTIONS.items():
        if getattr(args, dest) not in (None, False) and dest not in args.global_options:
            parser.error(f"{args.command} does not take {flag}")  # given before it: exit 2
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        status: int = args.func(args)
        return status
    except Unavailable as exc:
        print(exc, file=sys.stderr)
        return EXIT_UNAVAILABLE
    except BadSetting as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
