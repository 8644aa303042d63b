"""``python -m eventbus requeue|claim``, exit statuses and ``--help``; one copy of the shared code.

Requeue must behave as the console's: each entry exactly once (two concurrent requeues of the same IDs
make one new entry each), the original fields back without the DLQ's bookkeeping, ``_requeued_from``
added. Expected entries are computed here from the DLQ entry as written, not by the code under test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import redis

from eventbus.__main__ import main
from tests.console.redis_ops.helpers import EVENTBUS_ENTRY, OMNI_DATA, OMNI_KEY
from tests.servers import REPO


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eventbus", *args],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, dict]:
    status = main([argv[0], "--url", url, "--json", *argv[1:]])
    return status, json.loads(capsys.readouterr().out)


def test_requeue_ids_writes_the_original_back_once(capsys, url: str, r: redis.Redis) -> None:
    dlq_id = r.xadd("{orders}:dlq", dict(EVENTBUS_ENTRY)).decode()
    seed_id = r.xadd("{orders}:dlq", {"type": "t", "_retries": "3"}).decode()  # the seed module's shape
    status, doc = run(capsys, url, "requeue", "{orders}:dlq", "--ids", dlq_id, seed_id)
    assert status == 0 and doc["missing"] == [] and doc["failed"] == []
    new = {entry_id.decode(): fields for entry_id, fields in r.xrange("orders")}
    assert [(x["dlq_id"], x["stream"]) for x in doc["requeued"]] == [(dlq_id, "orders"), (seed_id, "orders")]
    assert list(new) == [x["new_id"] for x in doc["requeued"]]
    kept = [(k, v) for k, v in EVENTBUS_ENTRY if not k.startswith(b"dlq_") and k != b"_retries"]
    assert list(new[doc["requeued"][0]["new_id"]].items()) == [*kept, (b"_requeued_from", dlq_id.encode())]
    assert new[doc["requeued"][1]["new_id"]] == {b"type": b"t", b"_requeued_from": seed_id.encode()}
    assert r.xlen("{orders}:dlq") == 0
    status, doc = run(capsys, url, "requeue", "{orders}:dlq", "--ids", dlq_id)
    assert status == 1 and doc["missing"] == [dlq_id] and doc["requeued"] == []
    assert r.xlen("orders") == 2


def test_two_concurrent_requeues_make_one_entry(url: str, r: redis.Redis) -> None:
    ids = [r.xadd("{orders}:dlq", dict(EVENTBUS_ENTRY)).decode() for _ in range(300)]
    args = [sys.executable, "-m", "eventbus", "requeue", "--url", url, "--json", "{orders}:dlq", "--batch", "7",
            "--ids", *ids]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    docs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert r.xlen("orders") == 300 and r.xlen("{orders}:dlq") == 0
    requeued = [x["dlq_id"] for doc in docs for x in doc["requeued"]]
    assert sorted(requeued) == sorted(ids)  # each one by exactly one of the two
    assert sorted(requeued + [i for doc in docs for i in doc["missing"]]) == sorted(ids * 2)
    sources = [fields[b"_requeued_from"].decode() for _, fields in r.xrange("orders")]
    assert sorted(sources) == sorted(ids)


def test_requeue_all_up_to_leaves_newer_entries(capsys, url: str, r: redis.Redis) -> None:
    ids = [r.xadd(OMNI_KEY, {"data": OMNI_DATA}).decode() for _ in range(5)]
    status, doc = run(capsys, url, "requeue", OMNI_KEY.decode(), "--all", "--up-to", ids[2], "--batch", "2")
    assert status == 0 and [x["dlq_id"] for x in doc["requeued"]] == ids[:3]
    assert [i.decode() for i, _ in r.xrange(OMNI_KEY)] == ids[3:]
    failed_message = json.loads(OMNI_DATA)["failed_message"]
    for _, fields in r.xrange("omni-stream:file.uploaded"):
        assert json.loads(fields[b"data"]) == failed_message


def test_requeue_reports_what_it_cannot_place(capsys, url: str, r: redis.Redis) -> None:
    bad = r.xadd(OMNI_KEY, {"data": b"not json"}).decode()
    status, doc = run(capsys, url, "requeue", OMNI_KEY.decode(), "--ids", bad)
    assert status == 1 and doc["failed"][0]["dlq_id"] == bad and "came from" in doc["failed"][0]["reason"]
    assert r.xlen(OMNI_KEY) == 1
    r.xadd("plain", {"a": "1"})
    assert main(["requeue", "--url", url, "plain", "--ids", "1-0"]) == 2
    assert "not a dead-letter queue" in capsys.readouterr().err
    assert main(["requeue", "--url", url, OMNI_KEY.decode(), "--all"]) == 2
    assert "--up-to" in capsys.readouterr().err


def test_claim_respects_min_idle(capsys, url: str, r: redis.Redis) -> None:
    for i in range(4):
        r.xadd("orders", {"n": str(i)})
    r.xgroup_create("orders", "billing", id="0")
    delivered = [i for i, _ in r.xreadgroup("billing", "w1", {"orders": ">"})[0][1]]
    r.xclaim("orders", "billing", "w1", 0, delivered[:2], idle=600_000)  # long idle, without waiting
    ids = [i.decode() for i in delivered]
    status, doc = run(capsys, url, "claim", "orders", "billing", "--consumer", "rescue", "--min-idle", "500000",
                      "--ids", *ids)  # fmt: skip
    assert status == 1 and doc["claimed"] == ids[:2] and doc["skipped"] == ids[2:]
    owners = {row["message_id"].decode(): row["consumer"].decode()
              for row in r.xpending_range("orders", "billing", "-", "+", 10)}  # fmt: skip
    assert owners == {ids[0]: "rescue", ids[1]: "rescue", ids[2]: "w1", ids[3]: "w1"}
    status, doc = run(
        capsys, url, "claim", "orders", "billing", "--consumer", "other", "--min-idle", "0", "--all"
    )
    assert status == 0 and sorted(doc["claimed"]) == sorted(ids)
    assert {row["consumer"] for row in r.xpending_range("orders", "billing", "-", "+", 10)} == {b"other"}


@pytest.mark.slow
def test_exit_statuses_and_plain_help(url: str, r: redis.Redis) -> None:
    done = cli("--help")
    assert done.returncode == 0 and "\x1b" not in done.stdout
    assert "69 Redis could not be reached" in done.stdout and "requeue" in done.stdout
    for command in ("list", "inspect", "groups", "pending", "dlq", "stats", "requeue", "claim"):
        done = cli(command, "--help")
        assert done.returncode == 0 and "exit status: 0 done; 1 nothing done" in done.stdout, command
    assert "--search takes the bus's search language" in cli("inspect", "--help").stdout
    assert cli("claim", "--url", url, "orders", "g", "--consumer", "c").returncode == 2  # no --min-idle
    assert cli("pending", "--url", url, "orders", "g", "--min-idle", "-5").returncode == 2
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = cli("list", "--url", f"redis://127.0.0.1:{port}/0")
    assert done.returncode == 69 and "cannot reach Redis" in done.stderr and "Traceback" not in done.stderr


def test_the_console_uses_the_same_one_copy() -> None:
    import importlib.util

    import eventbus.scripts
    from streams_app.redis_ops import conventions
    from streams_app.redis_ops.actions import _common, moves

    # the glob, the decoder and the conventions are imported from the bus: no console module passes them on
    for gone in ("streams_app.redis_ops.glob", "streams_app.redis_ops.decoding"):
        assert importlib.util.find_spec(gone) is None
    assert not hasattr(conventions, "DLQ_SUFFIX") and not hasattr(conventions, "dlq_candidates")
    assert _common._source("requeue") == eventbus.scripts.source("requeue")
    assert not (REPO / "streams_app" / "redis_ops" / "lua" / "requeue.lua").exists()
    # the functions the Lua scripts of both share: one file each, in the bus, joined in when a script is read
    scripts = [
        *(REPO / "eventbus" / "lua").glob("*.lua"),
        *(REPO / "streams_app" / "redis_ops" / "lua").glob("*.lua"),
    ]
    for prelude in ("add_then_remove", "hset_many"):
        definers = [path.name for path in scripts if f"local function {prelude}(" in path.read_text()]
        assert definers == [f"{prelude}.lua"]
    # the cross-slot move: the console hands its client to the bus's steps, whose key names it imports
    assert not any(hasattr(moves, name) for name in ("BUSY", "lease_key", "record_key"))
    assert not hasattr(_common, "slot_twin")
    for script in ("move_lease", "move_add"):
        assert not (REPO / "streams_app" / "redis_ops" / "lua" / f"{script}.lua").exists()


def test_list_and_requeue_on_a_cluster(capsys, cluster, rc) -> None:
    """SCAN walks every primary; a requeue moves every dead letter, in the DLQ's slot or not
    (the cross-slot cases in depth: tests/cluster/test_cli_requeue.py)."""
    keys = [f"s{i}" for i in range(12)]
    for key in keys:
        rc.xadd(key, {"a": "1"})
    nodes = {rc.get_node_from_key(key).name for key in keys}
    assert len(nodes) > 1  # the keys really are spread over primaries
    url = cluster.url()
    status, doc = run(capsys, url, "list")
    assert status == 0 and sorted(row["key"] for row in doc["streams"]) == sorted(keys)
    here = rc.xadd("{orders}:dlq", dict(EVENTBUS_ENTRY)).decode()  # target "orders" shares the slot
    elsewhere = rc.xadd("{orders}:dlq", {**dict(EVENTBUS_ENTRY), b"dlq_original_stream": b"s0"}).decode()
    assert rc.keyslot("s0") != rc.keyslot("{orders}:dlq")
    status, doc = run(capsys, url, "requeue", "{orders}:dlq", "--ids", here, elsewhere)
    assert status == 0 and [(x["dlq_id"], x["stream"]) for x in doc["requeued"]] == [
        (here, "orders"),
        (elsewhere, "s0"),
    ]
    assert doc["failed"] == [] and doc["missing"] == []
    assert rc.xlen("orders") == 1 and rc.xlen("s0") == 2 and rc.xlen("{orders}:dlq") == 0
    [(_, copy)] = rc.xrange("s0", doc["requeued"][1]["new_id"], doc["requeued"][1]["new_id"])
    assert copy[b"_requeued_from"] == elsewhere.encode() and b"dlq_error" not in copy
