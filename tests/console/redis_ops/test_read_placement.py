"""Where the reads live: one module per thing read, the DLQ reads among them, raw figures out.

The module layout is checked with :mod:`ast` (no module re-exports another's names, none grows past
the size a reader takes in at once); the figures against what Redis itself answers: the overview's
memory is INFO's ``used_memory``, and the page writes it as Redis writes ``used_memory_human``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import redis
from django.template import Context, Template
from django.test import Client

from streams_app import services
from streams_app.redis_ops import actions
from streams_app.redis_ops.reads import server as server_reads
from tests.console.helpers import CONN

READS = Path(__file__).resolve().parents[3] / "streams_app" / "redis_ops" / "reads"


def test_the_reads_are_one_module_per_thing_read_and_re_export_nothing() -> None:
    modules = {path.stem: path for path in READS.glob("*.py")}
    assert set(modules) == {"__init__", "streams", "entries", "groups", "pending", "dlq", "server", "limits", "families"}
    init = ast.parse(modules["__init__"].read_text())
    assert not [node for node in init.body if isinstance(node, ast.Import | ast.ImportFrom)]
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules.items()}
    assert max(sizes.values()) < 300, sizes


def test_the_dlq_reads_live_with_the_reads_not_among_the_mutations() -> None:
    from streams_app.redis_ops.reads import dlq as dlq_reads

    assert callable(dlq_reads.dlq_entries) and callable(dlq_reads.dlq_list)
    assert not hasattr(actions, "dlq_entries")
    assert not hasattr(services, "dlq_list") and not hasattr(services, "DlqListing")


def test_the_dlq_list_reads_each_dlq_as_the_mask_shows_it(r: redis.Redis) -> None:
    """The origin streams a DLQ names are read from its entries as ``mask_for`` shows them."""
    from streams_app.redis_ops.reads import dlq as dlq_reads

    r.xadd(b"orders:dlq", {b"stream": b"orders", b"id": b"1-0", b"error": b"boom"})
    r.xadd(b"plain", {b"f": b"v"})
    asked: list[bytes] = []

    def mask_for(key: bytes):
        asked.append(key)
        return None

    listing = dlq_reads.dlq_list(CONN, mask_for=mask_for)
    # Redis's own answer: the streams whose key ends in :dlq
    expected = sorted(k for k in r.scan_iter(_type="stream") if k.endswith(b":dlq"))
    assert [dlq.key for dlq in listing.dlqs] == expected == asked
    assert listing.dlqs[0].source_streams == (b"orders",) and listing.complete


def redis_human(size: int) -> str:
    """Redis's ``bytesToHuman`` (src/object.c, 7.0), written again in plain Python as the oracle."""
    if size < 1024:
        return f"{size}B"
    for power, unit in enumerate("KMGTP", start=1):
        if size < 1024 ** (power + 1):
            return f"{size / 1024 ** power:.2f}{unit}"
    return f"{size}B"


def test_the_server_overview_is_a_frozen_record_of_raw_figures(r: redis.Redis) -> None:
    facts = server_reads.server_overview(CONN)
    assert dataclasses.is_dataclass(facts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.dbsize = 0  # frozen: the assignment is the point of the test
    assert isinstance(facts.used_memory, int) and facts.used_memory > 0
    assert facts.nodes == 1 and facts.missed == () and facts.unavailable == ()
    assert facts.dbsize == r.dbsize()
    # the server's own text of the same INFO reply, written by Redis from the same number
    assert facts.used_memory_human == redis_human(facts.used_memory)


@pytest.mark.parametrize(
    "size",
    [0, 1, 1023, 1024, 1025, 1536, 1024**2 - 1, 1024**2, 1_572_864, 987_654_321, 1024**3, 5 * 1024**4 + 17],
)
def test_the_page_writes_bytes_as_redis_writes_used_memory_human(size: int) -> None:
    rendered = Template("{% load figures %}{{ size|redis_bytes }}").render(Context({"size": size}))
    assert rendered == redis_human(size)


def test_the_overview_shows_the_servers_memory_in_its_own_words(r: redis.Redis, viewer_client: Client) -> None:
    page = viewer_client.get("/").content.decode()
    cell = re.search(r'<td class="num">([0-9.]+[BKMGT])</td>', page)
    assert cell is not None, page[:2000]
    shown, now = cell.group(1), r.info("memory")
    assert re.fullmatch(r"\d+B|\d+\.\d\d[KMGT]", shown)
    assert shown[-1] == now["used_memory_human"][-1]  # same unit as Redis's own text a moment later
