"""``python manage.py bus <command> ...``: the event bus's command line with the console's masking.

``python -m eventbus list|inspect|groups|pending|dlq|stats|requeue|claim`` shows entries as Redis stores
them: it is the bus's own tool, run with the URL's credentials, which read everything anyway. This is the
same tool for an operator's terminal, seen as the console shows things (every output of entry
bytes goes through the masker, docs/api.md#masking): every entry ``inspect``, ``dlq`` and ``journey`` print, search or parse is masked by
the console's rules (``BUSCONSOLE_MASK_RULES`` and the admin page's), as :meth:`Masker.entry` masks the
pages, before it is searched or printed; it never reveals. The URL is the console's connection
(``--conn``, default ``default``) unless ``--url`` is given. ``journey`` also shows the operator actions
the console's audit log holds for the event (which ``python -m eventbus journey``, Redis only, cannot).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from eventbus.__main__ import main as bus_main
from streams_app.journey import operator_steps
from streams_app.masking.apply import Masker, rules_load
from streams_app.redis_ops.types import Entry

COMMANDS = ("list", "inspect", "groups", "pending", "dlq", "stats", "requeue", "claim", "journey")


def shown_by_console(conn: str) -> Any:
    """The ``shown`` hook of :func:`eventbus.__main__.main`: the console's masker per key (rules read once)."""
    rules = rules_load()
    maskers: dict[bytes, Masker] = {}

    def shown(key: bytes, entry_id: str, fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        masker = maskers.get(key)
        if masker is None:
            masker = maskers[key] = Masker(rules, key=key, conn=conn)
        return list(masker.entry(Entry(id=entry_id, fields=tuple(fields))).fields)

    return shown


def _split(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``--conn NAME`` (anywhere) taken out of the bus's arguments."""
    rest, conn, i = [], "default", 0
    while i < len(argv):
        if argv[i] == "--conn" and i + 1 < len(argv):
            conn, i = argv[i + 1], i + 2
        elif argv[i].startswith("--conn="):
            conn, i = argv[i].split("=", 1)[1], i + 1
        else:
            rest.append(argv[i])
            i += 1
    return conn, rest


def run_bus(argv: Sequence[str]) -> int:
    conn, rest = _split(argv)
    if not rest or rest[0] not in COMMANDS:
        print(f"usage: manage.py bus {{{','.join(COMMANDS)}}} ... [--conn NAME] (see python -m eventbus --help)",
              file=sys.stderr)  # fmt: skip
        return 2
    if conn not in settings.BUS_REDIS_URLS:
        print(f"manage.py bus: no connection {conn!r} (BUS_REDIS_URLS names {', '.join(settings.BUS_REDIS_URLS)})",
              file=sys.stderr)  # fmt: skip
        return 2
    if not any(arg == "--url" or arg.startswith("--url=") for arg in rest):
        rest = [*rest, "--url", settings.BUS_REDIS_URLS[conn]]
    # journey: the operator actions of the console's audit log on the same timeline, as its page shows them;
    # DLQs are read by the console's configured conventions, as its pages read them
    return bus_main(rest, shown=shown_by_console(conn), journey_steps=partial(operator_steps, conn),
                    dlq_patterns=("BUSCONSOLE_DLQ_PATTERNS", _patterns_setting()))


def _patterns_setting() -> str:
    raw = getattr(settings, "BUSCONSOLE_DLQ_PATTERNS", "") or ""
    return raw if isinstance(raw, str) else json.dumps(raw)


class Command(BaseCommand):
    help = "The event bus's screens (python -m eventbus) with the console's masking and connections."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("bus_args", nargs=argparse.REMAINDER, help="a python -m eventbus command and its options")

    def run_from_argv(self, argv: list[str]) -> None:
        # Django's parser would take the bus's own options (--json, --limit) for its own: hand them over whole.
        sys.exit(run_bus(argv[2:]))

    def handle(self, *args: Any, bus_args: Sequence[str] = (), **options: Any) -> None:
        status = run_bus(list(bus_args))
        if status:
            raise CommandError(f"exit status {status}", returncode=status)
