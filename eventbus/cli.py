"""The operator's commands: ``python -m eventbus list|inspect|groups|pending|dlq|stats|requeue|claim|journey``,
registered on :mod:`eventbus.__main__`'s parser by :func:`add_commands`.

Each command prints a table for a human, or with ``--json`` one JSON document for a script, and exits
with a status a script can trust (:data:`EXIT_STATUS`). Reads are :mod:`eventbus.cli_reads`, actions
:mod:`eventbus.cli_actions`; DLQs are found and parsed by the one copy of the conventions
(:mod:`eventbus.conventions`), configured by ``--dlq-patterns``, ``$EVENTBUS_DLQ_PATTERNS``, or the setting
a program embedding this command line hands to :func:`eventbus.__main__.main`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import redis

from . import cli_actions, cli_reads, journey
from .cli_reads import CommandError, check_id
from .conventions import PATTERNS_VARIABLE, DlqPattern, PatternError, detect_dlq, parse_dlq_patterns
from .text import as_bytes

EXIT_STATUS = """\
exit status: 0 done; 1 nothing done or only part of it (an ID missing or
refused, nothing matched), or the key is not there; 2 bad arguments;
69 Redis could not be reached or refused the login."""

Output = tuple[Any, str, int]
"""What a command produced: the JSON document, the human text, the exit status."""


def _bytes(value: str) -> bytes:
    """A name from the command line as the bytes Redis holds (undecodable bytes survive argv)."""
    return as_bytes(value)


def _patterns(args: argparse.Namespace) -> tuple[DlqPattern, ...]:
    """``--dlq-patterns``, else the setting a program embedding the command line handed to
    :func:`eventbus.__main__.main` (its name and value), else ``$EVENTBUS_DLQ_PATTERNS``."""
    if args.dlq_patterns is not None:
        return parse_dlq_patterns(args.dlq_patterns, "--dlq-patterns")
    given = getattr(args, "patterns_setting", None)
    if given is not None:
        name, value = given
        return parse_dlq_patterns(value, name)
    return parse_dlq_patterns(os.environ.get(PATTERNS_VARIABLE, ""), PATTERNS_VARIABLE)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Rows as an aligned plain-text table; ``columns`` is (heading, row key)."""
    cells = [[h.upper() for h, _ in columns]]
    cells += [["-" if row.get(k) is None else str(row.get(k)) for _, k in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


# ------------------------------------------------------------------------------------------- the commands


def _list(client: Any, args: argparse.Namespace) -> Output:
    keys, truncated = cli_reads.scan_streams(client, match=args.match, max_keys=args.max_keys)
    rows = cli_reads.stream_rows(client, keys, _patterns(args))
    columns = [("stream", "key"), ("length", "length"), ("groups", "groups"), ("pending", "pending"),
               ("lag", "lag_text"), ("dlq", "dlq")]  # fmt: skip
    text = table(rows, columns) + (
        f"\n(stopped after {args.max_keys} streams: --max-keys)" if truncated else ""
    )
    return {"streams": rows, "truncated": truncated}, text, 0 if rows else 1


def _inspect(client: Any, args: argparse.Namespace) -> Output:
    start = check_id(args.start or ("+" if args.reverse else "-"), "--from")
    patterns = _patterns(args) if args.search else ()  # only a search reads a DLQ's conventions
    search = cli_reads.search_query(args.search, patterns) if args.search else None
    rows, scanned, after = cli_reads.read_entries(
        client, _bytes(args.stream), start=start, reverse=args.reverse, limit=args.limit, search=search,
        scan_limit=args.scan_limit, patterns=patterns, shown=args.shown,
    )  # fmt: skip
    lines = []
    for row in rows:
        lines.append(row["id"])
        lines += [f"  {field['name']} = {field['text']}" for field in row["fields"]]
    if after:
        lines.append(f"(more: --from '{after}')")
    doc: dict[str, Any] = {"entries": rows, "scanned": scanned, "next": after}
    if search is not None:
        lines.append(f"({len(rows)} matched in {scanned} entries read)")
        # Entries whose own data made the query too costly are no match: say so, never silently.
        doc["too_costly"] = costly = search.too_costly
        if costly:
            lines.append(
                f"({costly} entr{'y' if costly == 1 else 'ies'} too costly for the query "
                f"{'was' if costly == 1 else 'were'} not evaluated)"
            )
    return doc, "\n".join(lines), 0 if rows else 1


def _groups(client: Any, args: argparse.Namespace) -> Output:
    rows = cli_reads.group_rows(client, _bytes(args.stream))
    for row in rows:
        row["consumer_count"] = len(row["consumers"])
    columns = [("group", "name"), ("consumers", "consumer_count"), ("pending", "pending"),
               ("last delivered", "last_delivered_id"), ("lag", "lag")]  # fmt: skip
    return {"groups": rows}, table(rows, columns), 0


def _pending(client: Any, args: argparse.Namespace) -> Output:
    total, rows = cli_reads.pending_rows(
        client, _bytes(args.stream), _bytes(args.group), consumer=_bytes(args.consumer) if args.consumer else None,
        min_idle=args.min_idle, limit=args.limit,
    )  # fmt: skip
    columns = [("id", "id"), ("consumer", "consumer"), ("idle ms", "idle_ms"), ("deliveries", "deliveries")]
    text = table(rows, columns) + f"\n({len(rows)} shown of {total} pending in the group)"
    return {"total": total, "entries": rows}, text, 0


def _dlq(client: Any, args: argparse.Namespace) -> Output:
    patterns = _patterns(args)
    if args.key is not None:
        key = _bytes(args.key)
        cli_reads.require_stream(client, key)
        if detect_dlq(key, patterns) is not None:
            rows = cli_reads.dlq_entries(client, key, patterns, limit=args.limit, shown=args.shown)
            columns = [("id", "id"), ("stream", "original_stream"), ("group", "group"), ("retries", "retries"),
                       ("error", "error")]  # fmt: skip
            return {"dlq": args.key, "entries": rows}, table(rows, columns), 0
    keys, _ = cli_reads.scan_streams(client, max_keys=args.max_keys)
    dlqs = cli_reads.dlq_rows(client, keys, patterns, shown=args.shown)
    if args.key is not None:
        dlqs = [row for row in dlqs if _bytes(args.key) in row.sources]
    rows = [row.json() for row in dlqs]
    for row in rows:
        row["sources"] = ", ".join(row["source_streams"])
    columns = [("dlq", "key"), ("convention", "convention"), ("length", "length"), ("feeds", "sources")]
    return {"dlqs": [{k: v for k, v in r.items() if k != "sources"} for r in rows]}, table(rows, columns), 0


def _stats(client: Any, args: argparse.Namespace) -> Output:
    keys, _ = cli_reads.scan_streams(client, max_keys=args.max_keys)
    rows = cli_reads.stats_rows(client, keys, _patterns(args), window_s=args.window)
    columns = [("stream", "key"), ("length", "length"), ("pending", "pending"), ("lag", "lag_text"),
               ("dlq", "dlq_depth"), ("processed", "processed"), ("failed", "failed"),
               ("per s", "processed_per_s")]  # fmt: skip
    return {"streams": rows, "window_s": args.window}, table(rows, columns), 0


def _requeue(client: Any, args: argparse.Namespace) -> Output:
    key, patterns = _bytes(args.dlq), _patterns(args)
    if args.all:
        if not args.up_to:
            raise CommandError("--all needs --up-to ID (the newest entry to requeue)", 2)
        up_to = check_id(args.up_to, "--up-to", extremes=False)
        cli_reads.require_stream(client, key)
        outcome = cli_actions.requeue_up_to(client, key, up_to, patterns, batch=args.batch)
    else:
        ids = [check_id(i, "--ids", extremes=False) for i in args.ids]
        outcome = cli_actions.requeue_ids(client, key, ids, patterns, batch=args.batch)
    lines = [f"requeued {r['dlq_id']} -> {r['stream']} {r['new_id']}" for r in outcome.requeued]
    lines += [f"missing {i} (no longer in the DLQ)" for i in outcome.missing]
    lines += [f"failed {f['dlq_id']}: {f['reason']}" for f in outcome.failed]
    lines.append(
        f"{len(outcome.requeued)} requeued, {len(outcome.missing)} missing, {len(outcome.failed)} failed"
    )
    done = outcome.requeued and not outcome.missing and not outcome.failed
    return outcome.json(), "\n".join(lines), 0 if done else 1


def _claim(client: Any, args: argparse.Namespace) -> Output:
    key, group = _bytes(args.stream), _bytes(args.group)
    cli_reads.require_stream(client, key)
    ids = None if args.all else [check_id(i, "--ids", extremes=False) for i in args.ids]
    result = cli_actions.claim(
        client, key, group, consumer=_bytes(args.consumer), min_idle=args.min_idle, ids=ids
    )
    lines = [f"claimed {i}" for i in result["claimed"]] + [f"skipped {i}" for i in result["skipped"]]
    lines += [f"deleted {i} (its message is gone)" for i in result["deleted"]]
    lines.append(f"{len(result['claimed'])} claimed for {args.consumer}")
    done = result["claimed"] and not result["skipped"]
    return result, "\n".join(lines), 0 if done else 1


def _journey(client: Any, args: argparse.Namespace) -> Output:
    patterns = _patterns(args)
    try:
        start = journey.start_of(args.value, [_bytes(s) for s in args.stream], args.by)
        query = cli_reads.search_query(start.value, patterns) if start.by == "search" else None
        trace = journey.trace(client, start, patterns=patterns, shown=args.shown, query=query, cursor=args.cursor,
                              budget=args.budget)  # fmt: skip
    except journey.JourneyError as exc:
        raise CommandError(str(exc), 2) from exc
    hook = getattr(args, "journey_steps", None)
    found = journey.journey_of(trace)
    if hook is not None:  # a program embedding the command line adds the operator actions it recorded
        found = hook(found)
    else:
        found.trace.notes.append(journey.NO_OPERATOR_LOG)
    return found.json(), found.text(), 0 if trace.found_any else 1


# ----------------------------------------------------------------------------------------------- plumbing


def _runner(
    command: Callable[[Any, argparse.Namespace], Output], connect: Callable[[argparse.Namespace], Any]
) -> Callable[[argparse.Namespace], int]:
    """Connect (exit 69 when Redis is not there), run, print the table or the JSON, return the status."""

    def run(args: argparse.Namespace) -> int:
        bus = connect(args)
        try:
            document, text, status = command(bus.client, args)
        except CommandError as exc:
            print(exc, file=sys.stderr)
            return exc.status
        except PatternError as exc:
            print(exc, file=sys.stderr)
            return 2
        except redis.exceptions.NoPermissionError as exc:  # the URL's ACL user may not: say so, not just "refused"
            print(f"Redis refused (NOPERM): {exc}; the URL's user lacks that permission (deploy/redis/users.acl)",
                  file=sys.stderr)
            return 1
        except redis.ResponseError as exc:
            print(f"Redis refused: {exc}", file=sys.stderr)
            return 1
        finally:
            bus.close()
        if args.json:
            print(json.dumps(document, indent=2, ensure_ascii=False))
        elif text:
            print(text)
        return status

    return run


def _ids_or_all(parser: argparse.ArgumentParser, what: str) -> None:
    choice = parser.add_mutually_exclusive_group(required=True)
    choice.add_argument("--ids", nargs="+", metavar="ID", help=f"the {what} to act on")
    choice.add_argument("--all", action="store_true", help=f"all the {what}")


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    parser: Callable[..., argparse.ArgumentParser],
    url_help: str,
    connect: Callable[[argparse.Namespace], Any],
    global_option: Callable[..., None],
) -> None:
    """Register the commands; ``parser(commands, name, summary, examples)`` builds each subparser,
    ``connect(args)`` returns a reachable :class:`eventbus.Bus` (or raises the 69 exit) and
    ``global_option(sub, flag, ...)`` adds an option also taken before the command."""

    def command(
        name: str, summary: str, examples: str, func: Callable[[Any, argparse.Namespace], Output], dlq: bool = False
    ) -> argparse.ArgumentParser:
        sub = parser(commands, name, summary, examples + "\n" + EXIT_STATUS + "\n")
        global_option(sub, "--url", help=url_help)
        global_option(sub, "--json", action="store_true", help="print one JSON document instead of a table")
        if dlq:
            global_option(
                sub, "--dlq-patterns", metavar="JSON",
                help=f"configured DLQ conventions, a JSON list (default: ${PATTERNS_VARIABLE})",
            )  # fmt: skip
        sub.set_defaults(func=_runner(func, connect))
        return sub

    scan_help = "stop SCAN after this many streams (default: 10000)"
    listing = command("list", "list the streams: length, groups, pending, lag, DLQ mark",
                      "  python -m eventbus list\n  python -m eventbus list --match 'orders*' --json\n",
                      _list, dlq=True)  # fmt: skip
    listing.add_argument("--match", default="*", help="Redis glob on the key (default: *)")
    listing.add_argument("--max-keys", type=int, default=10_000, help=scan_help)

    inspect = command(
        "inspect", "show a stream's entries, decoded",
        "  python -m eventbus inspect orders --limit 5\n"
        "  python -m eventbus inspect orders --reverse --search declined\n"
        "  python -m eventbus inspect orders --search 'data.customer.id == 42 && size(data.items) > 3'\n"
        "  python -m eventbus inspect '{orders}:dlq' --search 'retries >= 3 && error.contains(\"Timeout\")'\n"
        "\n--search takes the bus's search language. Plain text (timeout, order.paid,\n"
        "card declined) matches an entry when a field name or value contains it, ignoring case.\n"
        "A CEL expression sees every field by name, decoded (JSON and msgpack as maps and lists),\n"
        "fields, id and time; on a DLQ also error, traceback, retries, origin, original_id,\n"
        "failed_at and group. An expression that does not parse, or is too costly to run, is\n"
        "exit 2 with the reason. An entry whose own data (a long list under nested .exists())\n"
        "makes it too costly is not evaluated: no match, and counted (too_costly in --json).\n",
        _inspect, dlq=True,
    )  # fmt: skip
    inspect.add_argument("stream")
    inspect.add_argument("--from", dest="start", default=None, metavar="ID",
                         help="first ID (inclusive; '(ID' exclusive; default: the oldest, or newest with --reverse)")  # fmt: skip
    inspect.add_argument("--reverse", action="store_true", help="newest first")
    inspect.add_argument("--limit", type=_positive, default=20, help="entries shown (default: 20)")
    inspect.add_argument("--search", metavar="QUERY", help="only entries matching QUERY (text or expression)")
    inspect.add_argument("--scan-limit", type=_positive, default=10_000,
                         help="entries a search reads at most (default: 10000)")  # fmt: skip

    groups = command("groups", "show a stream's consumer groups and their consumers",
                     "  python -m eventbus groups orders --json\n", _groups)  # fmt: skip
    groups.add_argument("stream")

    pending = command("pending", "show a group's pending entries, oldest first",
                      "  python -m eventbus pending orders billing --min-idle 60000\n", _pending)  # fmt: skip
    pending.add_argument("stream")
    pending.add_argument("group")
    pending.add_argument("--consumer", help="only this consumer's entries")
    pending.add_argument(
        "--min-idle", type=_non_negative, default=None, metavar="MS", help="only entries idle this long"
    )
    pending.add_argument("--limit", type=_positive, default=100, help="entries shown (default: 100)")

    dlq = command(
        "dlq", "list dead-letter queues, a stream's DLQs, or a DLQ's entries",
        "  python -m eventbus dlq\n  python -m eventbus dlq orders\n  python -m eventbus dlq '{orders}:dlq'\n"
        "\nDLQs are found by their conventions: {stream}:dlq (the bus and the seed\n"
        "streams module), omni-dlq:{group} (OmniDaemon), and the configured patterns.\n",
        _dlq, dlq=True,
    )  # fmt: skip
    dlq.add_argument("key", nargs="?", metavar="STREAM", help="a DLQ (its entries) or a stream (its DLQs)")
    dlq.add_argument("--limit", type=_positive, default=20, help="DLQ entries shown (default: 20)")
    dlq.add_argument("--max-keys", type=int, default=10_000, help=scan_help)

    stats = command("stats", "per stream: length, pending, lag, DLQ depth, handled events per second",
                    "  python -m eventbus stats --window 300\n", _stats, dlq=True)  # fmt: skip
    stats.add_argument("--window", type=_positive, default=60, metavar="S",
                       help="seconds of the bus's metric events counted (default: 60)")  # fmt: skip
    stats.add_argument("--max-keys", type=int, default=10_000, help=scan_help)

    requeue = command(
        "requeue", "move dead letters back to their streams, each exactly once",
        "  python -m eventbus requeue '{orders}:dlq' --ids 1700000000000-0\n"
        "  python -m eventbus requeue '{orders}:dlq' --all --up-to 1700000000000-0\n"
        "\nOne Lua script per batch; an entry another requeue moved\n"
        "first is reported missing, never added twice. On Redis Cluster an entry whose\n"
        "stream is in another hash slot moves in crash-safe steps (lease, add, delete);\n"
        "one a killed run left leased is reported failed until its lease expires (60 s).\n",
        _requeue, dlq=True,
    )  # fmt: skip
    requeue.add_argument("dlq", metavar="DLQ")
    _ids_or_all(requeue, "DLQ entries")
    requeue.add_argument("--up-to", metavar="ID", help="with --all: the newest entry requeued")
    requeue.add_argument("--batch", type=_batch, default=500, help="entries per script call (default: 500)")

    journey_cmd = command(
        "journey", "every place one event has been: its stream, groups, retries, dead letters, requeues",
        "  python -m eventbus journey 1700000000000-0 --stream orders\n"
        "  python -m eventbus journey 3f2a...e1 --stream orders          (the bus's event id)\n"
        "  python -m eventbus journey 'data.order_id == 7' --stream orders --stream payments\n"
        "  python -m eventbus journey req-42 --by correlation --stream orders --json\n"
        "\nStarts from an entry ID (one --stream), the bus's event id, a correlation id (--by\n"
        "correlation) or a search query (plain text or CEL, as inspect --search takes it), and\n"
        "shows one timeline: the publish, each group's delivery (pending, acknowledged, not yet),\n"
        "the handler's failures, the retries, the dead letters in every convention and the\n"
        "requeued copies. Bounded: it says how many entries of how many it read; --cursor\n"
        "continues a scan that stopped. Operator actions (requeues, claims, replays by a\n"
        "person) are not in Redis: only a tool that records them can add them.\n",
        _journey, dlq=True,
    )  # fmt: skip
    journey_cmd.add_argument("value", metavar="START", help="an entry ID, an event id, a correlation id or a query")
    journey_cmd.add_argument("--stream", action="append", required=True, help="a stream to look in (repeatable)")
    journey_cmd.add_argument("--by", choices=("auto", *journey.BY), default="auto",
                             help="what START is (default: an entry ID's or an event id's shape, else a query)")  # fmt: skip
    journey_cmd.add_argument("--cursor", default=None, help="the 'next' of an earlier answer: continue its scan")
    journey_cmd.add_argument("--budget", type=_positive, default=journey.BUDGET,
                             help="entries read at most (default: 50000)")  # fmt: skip

    claim = command(
        "claim", "give pending entries idle for --min-idle to another consumer",
        "  python -m eventbus claim orders billing --consumer rescue --min-idle 60000 --all\n", _claim,
    )  # fmt: skip
    claim.add_argument("stream")
    claim.add_argument("group")
    claim.add_argument("--consumer", required=True, help="the consumer that takes the entries")
    claim.add_argument("--min-idle", type=_non_negative, required=True, metavar="MS",
                       help="only entries idle at least this long")  # fmt: skip
    _ids_or_all(claim, "pending entries")


def _positive(value: str) -> int:
    number = _non_negative(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be at least 1")
    return number


def _batch(value: str) -> int:
    number = _positive(value)
    if number > cli_actions.MAX_BATCH:
        raise argparse.ArgumentTypeError(f"{value!r} is more than {cli_actions.MAX_BATCH}")
    return number


def _non_negative(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is negative")
    return number
