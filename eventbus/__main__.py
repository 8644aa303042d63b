"""Command line: ``python -m eventbus {worker,publish,demo,migrate} ...``.

    python -m eventbus worker app:bus [--group billing --group email] [--concurrency 16]
    python -m eventbus publish --url redis://localhost:6379/0 orders order.created '{"order_id": 7}'
    python -m eventbus demo --url redis://localhost:6379/0
    python -m eventbus migrate --url redis://localhost:6379/0 [orders payments]

The URL defaults to ``$BUS_REDIS_URL``, else ``redis://localhost:6379/0``. ``worker`` takes the
URL from the ``Bus`` it imports.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence

from .bus import Bus
from .errors import DuplicateEvent

DEFAULT_URL = "redis://localhost:6379/0"


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


def _worker(args: argparse.Namespace) -> int:
    bus = load_bus(args.target)
    config = {"lease_ms": args.lease_ms, "block_ms": args.block_ms, "shutdown_timeout": args.shutdown_timeout}
    if args.prefetch is not None:
        config["prefetch"] = args.prefetch
    bus.run(groups=args.group or None, concurrency=args.concurrency, **config)
    return 0


def _publish(args: argparse.Namespace) -> int:
    try:
        data = json.loads(args.json)
    except json.JSONDecodeError as exc:
        print(f"JSON payload is invalid: {exc}", file=sys.stderr)
        return 2
    bus = Bus.from_url(args.url)
    try:
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

    bus = Bus.from_url(args.url)
    try:
        results = migrate(bus.client, args.streams or None)
    finally:
        bus.close()
    for done in results:
        print(
            f"{done.stream}: {done.retries} retries and {done.unique_keys} unique keys moved; "
            f"{done.old_dead_letters} dead letters left in the old DLQ (requeue them from the console)"
        )
    if not results:
        print("nothing to migrate: no retry or unique set under an old name")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(args.url)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eventbus", description=__doc__.split("\n")[0])
    parser.add_argument("--log-level", default=os.environ.get("EVENTBUS_LOG_LEVEL", "INFO"))
    commands = parser.add_subparsers(dest="command", required=True)

    worker = commands.add_parser("worker", help="run handlers of a Bus until SIGTERM/SIGINT")
    worker.add_argument("target", help="module:attribute of the Bus, e.g. app:bus")
    worker.add_argument("--group", action="append", help="consumer group to run (repeatable; default: all)")
    worker.add_argument("--concurrency", type=int, default=8)
    worker.add_argument(
        "--prefetch", type=int, default=None, help="entries fetched ahead (default: concurrency)"
    )
    worker.add_argument("--lease-ms", type=int, default=30_000, help="idle time after which others reclaim")
    worker.add_argument("--block-ms", type=int, default=1_000)
    worker.add_argument("--shutdown-timeout", type=float, default=30.0)
    worker.set_defaults(func=_worker)

    url = os.environ.get("BUS_REDIS_URL", DEFAULT_URL)
    publish = commands.add_parser("publish", help="publish one event and print its entry ID")
    publish.add_argument("--url", default=url)
    publish.add_argument("--correlation-id")
    publish.add_argument("--unique-key")
    publish.add_argument("stream")
    publish.add_argument("type")
    publish.add_argument("json", help="the event data, as JSON")
    publish.set_defaults(func=_publish)

    migrate = commands.add_parser(
        "migrate", help="move retries and unique keys from the pre-cluster names ({S}:retry, see eventbus.keys)"
    )
    migrate.add_argument("--url", default=url)
    migrate.add_argument("streams", nargs="*", help="streams to migrate (default: every one found by SCAN)")
    migrate.set_defaults(func=_migrate)

    demo = commands.add_parser("demo", help="run realistic demo traffic until SIGTERM/SIGINT")
    demo.add_argument("--url", default=url)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
