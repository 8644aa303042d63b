"""Benchmark: the live tail (docs/performance.md#goals-and-floors).

Goals: one blocking Redis reader per process and monitored server for all tailed streams; p99
XADD-to-frame within 1.5x of a bare XREAD reader's p99 (same run) at 100 clients x 200 entries/s, within
3x at 500 x 200/s and 100 x 1000/s, within 5x at 1,000 x 200/s on one web process and on two (half the
clients each, the one-process figure printed beside it), all delivered; beyond that it degrades by
batching frames and skipping slow clients ahead, never by unbounded memory. Reported through
``bench/_summary.py``.

Run from the repository root: ``.venv/bin/python bench/tail.py`` (about 6 minutes; ``--seconds`` sets
the measured time per case, 10 by default). It starts its own redis-server, a throwaway SQLite
database with one viewer and a session, and uvicorn processes serving ``busconsole.asgi`` exactly as
``make run`` does (``--ws websockets --ws-per-message-deflate false``). Then, for 1, 100 and 500
websocket clients and a feed of 200 and 1000 entries/s, and 1,000 clients at 200/s:

- a feeder process XADDs at the rate, each entry carrying its send time (``t``, first field, integer
  microseconds);
- client processes, never the server's, hold the websockets on raw sockets (:class:`RawTail`: a
  hand-written handshake and frame parser, so the clients do not eat the CPU they measure) and turn
  each received entry into a latency: receive time minus ``t`` (same machine, same clock);
- in the same run, a bare redis-py ``XREAD BLOCK`` loop on the same stream measures the floor: what
  any reader of Redis sees, with no console in between;
- after the feed, one operator event is broadcast through the channel layer: every client must get it.

``--filter TEXT`` makes every other client of those cases tail through that filter (search's
language, evaluated on the server once per entry for all of them; ``type == "order.created"`` keeps
every entry of the feed, so deliveries still add up).

The clients share the 2 cores with the server they measure, and at 1,000 sockets they take about as
much CPU as it does: each frame is a read per socket (a system call, then Python), so a client process
holding 500 sockets reads the last of them after the 499 before it, and that wait is inside the
figures. So a client keeps per frame only its receive time, its first and last send times and its count
of entries (three searches of its bytes, in C), and gives each entry its own latency after the drain,
from the send times read back from Redis (:func:`client_process`): parsing every send time on arrival
had cost about as much as the read itself. What is measured is unchanged: every entry's receive time at
the client minus its send time. On loopback each of the server's socket writes also pays the client
side's TCP receive and wake-up, which a server writing to remote browsers does not.

Then the same at 100 x 200/s against a server and clients that negotiate permessage-deflate (as
browsers offer it), to show what per-client compression costs (``--deflate off`` skips it), and
1,000 x 200/s and 500 x 1000/s over TWO uvicorn processes behind the same Redis channel layer, half the
clients on each (``--procs 1`` skips them), to show the tail scales by adding processes; and the 500- and
1,000-client cases once more on a process whose tail hand-outs may take more of it
(``--pace-alt PERCENT:MS``, 30:12 by default, the defaults before 80:4: ``BUSCONSOLE_TAIL_FANOUT_PERCENT`` and
``BUSCONSOLE_TAIL_PACE_MAX_MS``; ``off`` skips them), printed beside the defaults, not a goal.
Reported per case: p50/p99/max latency (websocket and bare XREAD), the share of the expected
deliveries (entries x clients) that arrived by the end of the drain time, skip notes received
(``skipped`` frames: a slow client skipped ahead, or the reader jumping to the newest entry when the
process cannot keep up) and the entries they counted, the clients that got the operator event, frames
per entry (batching), XREAD calls per second of the console (the bare reader's own taken out), Redis
connections of the tail hubs and all connections to the monitored database that are not the
benchmark's own, the server processes' peak RSS and CPU, server CPU per entry delivered to one client,
and the client processes' CPU.

The Redis Cluster case (``--cluster yes``, the default; ``only`` runs it alone) starts a 3-primary
cluster as well, and 100 clients tail 100 streams in 100 different slots (``--cluster-clients``,
``--cluster-keys``) while a feeder XADDs 200 entries/s in all, round robin, through a cluster client.
No XREAD may span two slots, so the floor is a bare ``XREAD BLOCK`` per key, each on a connection of its
own to the key's node (the best any reader can see). It runs in both modes of the hub, each on a web
process of its own (``--cluster-modes``): **slot readers**, one blocked connection per tailed slot up to
``BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE`` per node (``--slot-readers`` sets it; the goal: p99 within 3x
the floor, all delivered, connections per node within that bound + 2), and the **polling fallback**
(the bound at 0), where a node's slots are read in one round trip per ``BUSCONSOLE_TAIL_POLL_MS``
(``--poll-ms`` sets it; all delivered, 2 connections per node). Reported per mode: p50/p99/max against
the floor, deliveries, the hub's connections per node (the most CLIENT LIST showed, sampled every
0.25 s), XREAD/s and server CPU while fed and while idle (every client live, nothing written).
Latencies are histogrammed in 10 us bins; a client keeps 32 bytes per frame until the drain.
Clients and server share the machine's cores: the clients' reading time is inside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import multiprocessing as mp
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._summary import check, within  # noqa: E402
from tests.servers import RedisClusterServers, RedisServer, free_port  # noqa: E402

CLIENTS = (1, 100, 500)
RATES = (200, 1000)
#: Cases run on top of CLIENTS x RATES by default: 1,000 clients at the lower rate only (1,000 x 1000/s
#: is a million deliveries a second, beyond what 2 cores serve to clients on the same 2 cores).
EXTRA_CASES = ((1000, 200),)
#: Cases over two web processes (``--procs both``): (clients, rate).
TWO_PROCESS_CASES = ((1000, 200), (500, 1000))
WARMUP_S = 1.0
DRAIN_S = 1.5
BIN_US = 10
RECV_BUFFER = 256 * 1024  # per client socket; grows for a bigger frame
BINS = 200_000  # 10 us x 200k = 2 s; slower deliveries land in the last bin (reported as ">= 2 s")

# Entry frames start {"type":"entry","id":"...","fields":{"t":"<send time>",...}, the send time in integer
# microseconds since the epoch, strictly increasing over a feed: found without parsing the frame (the
# clients must not be the bottleneck they measure; see client_process).
SENT = re.compile(rb'"fields":\{"t":"([0-9]+)"')
SENT_AT = b'"fields":{"t":"'
SKIPPED = re.compile(rb'"type":"skipped","count":(\d+|null)')
CHANGED = b'"type":"changed"'  # an operator event relayed through the channel layer
DATA = json.dumps({"order_id": 123456, "customer": "c-42", "total": 99.5, "currency": "EUR",
                   "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}]})


# ------------------------------------------------------------------------------- histograms


def new_hist() -> array:
    return array("q", bytes(8 * BINS))


PER_BIN = 1_000_000 / BIN_US  # bins per second
TOP_BIN = BINS - 1


def record(hist: array, seconds: float) -> None:
    hist[min(TOP_BIN, max(0, int(seconds * PER_BIN)))] += 1


def percentile(hist: array, q: float) -> float | None:
    total = sum(hist)
    if not total:
        return None
    rank, seen = math.ceil(q * total), 0
    for i, n in enumerate(hist):
        seen += n
        if seen >= rank:
            return (i + 1) * BIN_US / 1000  # ms, upper edge of the bin
    return None


def merge(hists: list[array]) -> array:
    out = new_hist()
    for h in hists:
        for i, n in enumerate(h):
            if n:
                out[i] += n
    return out


def max_ms(hist: array) -> float | None:
    for i in range(BINS - 1, -1, -1):
        if hist[i]:
            return (i + 1) * BIN_US / 1000
    return None


# ------------------------------------------------------------------------------ processes


class RawTail(asyncio.BufferedProtocol):
    """One tail websocket read straight off its socket: a hand-written handshake and frame parser.

    The clients share the machine's cores with the server they measure, and the time they take to
    parse is inside the latencies they report (the 250th socket of a process is read after the 249
    before it). So a message costs no more than it must: the loop receives into one buffer per socket
    (``BufferedProtocol``: no ``bytes`` per read), a frame is scanned in place by one regex, and each
    entry costs a float and a histogram increment; with permessage-deflate, one ``zlib`` call more. A
    full client library (``websockets``) spends tens of microseconds per message in coroutines and
    checks. Server frames are unmasked and, from the console, never fragmented, but continuation frames
    are joined anyway; pings are answered so the server keeps the socket.
    """

    def __init__(self, request: bytes, deflate: bool,
                 on_message: Callable[[Any, int, int, float], None]) -> None:
        self.request = request
        self.deflate = deflate
        self.on_message = on_message  # (buffer, start, end, receive time): the message is buffer[start:end]
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray(RECV_BUFFER)
        self.size = 0  # bytes of self.buf received and not yet parsed
        self.handshaken = False
        self.inflate: Any = None
        self.fresh_inflate = False  # server_no_context_takeover: a new inflater per message
        self.parts: list[bytes] = []
        self.compressed = False
        self.live: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]  # uvloop's transports are not asyncio's classes; each one writes

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in (self.live, self.closed):
            if not fut.done():
                fut.set_result(None)

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buf) - self.size < 65536:  # a frame bigger than the buffer: a bigger one
            bigger = bytearray(2 * len(self.buf))  # (a new one: the loop may still hold a view of the old)
            bigger[: self.size] = self.buf[: self.size]
            self.buf = bigger
        return memoryview(self.buf)[self.size :]

    def buffer_updated(self, nbytes: int) -> None:
        now = time.time()
        self.size += nbytes
        buf, pos, size = self.buf, 0, self.size
        if not self.handshaken:
            head_end = buf.find(b"\r\n\r\n", 0, size)
            if head_end < 0:
                return
            head = bytes(buf[:head_end]).decode("latin-1").lower()
            pos = head_end + 4
            if not head.startswith("http/1.1 101"):
                self.live.set_exception(RuntimeError(head.split("\r\n", 1)[0]))
                return
            self.handshaken = True
            if "permessage-deflate" in head:
                self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                self.fresh_inflate = "server_no_context_takeover" in head
        while size - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            length, head = b1 & 0x7F, 2
            if length == 126:
                if size - pos < 4:
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 4], "big"), 4
            elif length == 127:
                if size - pos < 10:
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 10], "big"), 10
            if size - pos < head + length:
                break
            start, pos = pos + head, pos + head + length
            opcode = b0 & 0x0F
            if opcode == 1 and b0 & 0xC0 == 0x80 and self.live.done():
                self.on_message(buf, start, pos, now)  # the common case: a whole, uncompressed text frame
                continue
            if opcode in (1, 2):
                self.parts, self.compressed = [bytes(buf[start:pos])], bool(b0 & 0x40)
            elif opcode == 0:
                self.parts.append(bytes(buf[start:pos]))
            elif opcode == 9:  # ping: a masked pong (zero mask) with the same payload
                self._write(0x8A, bytes(buf[start:pos]))
                continue
            elif opcode == 8:
                if self.transport is not None:
                    self.transport.close()
                continue
            else:
                continue
            if b0 & 0x80:
                message = b"".join(self.parts)
                self.parts = []
                if self.compressed:
                    if self.fresh_inflate:
                        self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    message = self.inflate.decompress(message + b"\x00\x00\xff\xff")
                if not self.live.done():
                    if b'"live"' in message:
                        self.live.set_result(None)
                    continue
                self.on_message(message, 0, len(message), now)
        if pos:
            buf[: size - pos] = buf[pos:size]  # what is left of a partial frame (usually nothing)
            self.size = size - pos

    def _write(self, first: int, payload: bytes) -> None:
        if self.transport is not None and len(payload) < 126:
            self.transport.write(bytes((first, 0x80 | len(payload))) + b"\0\0\0\0" + payload)

    def close(self) -> None:
        if self.transport is not None:
            self._write(0x88, (1000).to_bytes(2, "big"))
            self.transport.close()


def handshake(url: str, headers: dict[str, str], origin: str, deflate: bool) -> tuple[str, int, bytes]:
    """Host, port and the upgrade request of a ``ws://`` URL."""
    parts = urlsplit(url)
    lines = [f"GET {parts.path}{'?' + parts.query if parts.query else ''} HTTP/1.1",
             f"Host: {parts.netloc}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}", "Sec-WebSocket-Version: 13",
             f"Origin: {origin}", *(f"{k}: {v}" for k, v in headers.items())]
    if deflate:
        lines.append("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
    return parts.hostname or "127.0.0.1", parts.port or 80, ("\r\n".join(lines) + "\r\n\r\n").encode()


def new_sent_us(last_us: int) -> int:
    """A feeder's next send time: now in integer microseconds, after ``last_us`` (each entry's is its own)."""
    return max(last_us + 1, time.time_ns() // 1000)


def feed_times(source: tuple[str, list[bytes]]) -> list[int]:
    """Every send time the feeder wrote to the streams ``source`` names ((Redis URL, keys)), ascending."""
    import redis

    client = redis.Redis.from_url(source[0], client_name="bench-monitor")
    times: list[int] = []
    for key in source[1]:
        after = "-"
        while True:
            page = client.xrange(key, min=after, max="+", count=10_000)
            times += [int(fields[b"t"]) for _, fields in page]
            if len(page) < 10_000:
                break
            after = "(" + page[-1][0].decode()
    client.close()
    return sorted(times)


def client_process(urls: list[str], headers: dict[str, str], origin: str, deflate: bool, window: Any, ready: Any,
                   out: Any, source: tuple[str, list[bytes]] | None = None) -> None:
    """Hold one websocket per URL (:class:`RawTail`); histogram every entry received in the measured window.

    Each entry's latency is the time its frame was received minus its send time. With ``source`` (the
    Redis URL and the keys fed), a frame costs three searches of its bytes while the clients are
    measured: its first and last send times and its count of entries, kept with its receive time; the
    entries in between are looked up after the drain among the send times the feeder wrote (read back
    from Redis), so each still gets its own latency. A frame whose count does not match the send times
    between its first and last (never seen with unfiltered tails: a batch is a run of consecutive entries)
    gives every entry the latency of its oldest, an upper bound, counted as ``bounded``. Without
    ``source`` every send time is parsed on arrival (a few microseconds more per entry).
    """
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def main() -> None:
        loop = asyncio.get_running_loop()
        hist = new_hist()
        counts = {"entries": 0, "frames": 0, "skipped": 0, "skip_notes": 0, "changed": 0, "clients": 0, "bounded": 0}
        bounds = [0, 0]  # the measured window, in microseconds
        frames = array("q")  # with ``source``: receive time, first and last send time, entries: 4 per frame
        at_len = len(SENT_AT)

        def on_message(message: Any, begin: int, end_: int, now: float) -> None:
            start, end = bounds
            at = message.find(SENT_AT, begin, end_)  # entries are in ID order: the send times ascend
            if at >= 0:
                at += at_len
                first = int(message[at : message.find(b'"', at, end_)])
                last_at = message.rfind(SENT_AT, at, end_)
                if last_at < 0:
                    last, n = first, 1
                else:
                    last_at += at_len
                    last = int(message[last_at : message.find(b'"', last_at, end_)])
                    n = 0
                now_us = int(now * 1e6)
                if start <= first and last < end:  # the whole frame is in the window: no check per entry
                    if source is not None:
                        n = n or message.count(SENT_AT, begin, end_)
                        frames.extend((now_us, first, last, n))
                    else:
                        sent = [int(t) for t in SENT.findall(message, begin, end_)]
                        n = len(sent)
                        for t in sent:
                            hist[min(TOP_BIN, max(0, (now_us - t) // BIN_US))] += 1
                    counts["entries"] += n
                    counts["frames"] += 1
                elif last >= start and first < end:  # the window's edges: parsed entry by entry
                    in_window = [t for t in map(int, SENT.findall(message, begin, end_)) if start <= t < end]
                    for t in in_window:
                        hist[min(TOP_BIN, max(0, (now_us - t) // BIN_US))] += 1
                    counts["entries"] += len(in_window)
                    counts["frames"] += 1
                return
            if message.find(CHANGED, begin, end_) >= 0:
                counts["changed"] += 1
            if message.find(b'"skipped"', begin, end_) >= 0:
                for skipped in SKIPPED.findall(message, begin, end_):
                    counts["skip_notes"] += 1
                    counts["skipped"] += 0 if skipped == b"null" else int(skipped)

        gate = asyncio.Semaphore(50)

        async def open_one(url: str) -> RawTail:
            host, port, request = handshake(url, headers, origin, deflate)
            async with gate:
                _, proto = await loop.create_connection(lambda: RawTail(request, deflate, on_message), host, port)
                await asyncio.wait_for(proto.live, 60)
                if proto.closed.done():
                    raise RuntimeError(f"{url}: closed before going live")
                return proto

        sockets = await asyncio.gather(*(open_one(url) for url in urls))
        counts["clients"] = len(sockets)
        ready.put(len(sockets))
        start_s, end_s = await asyncio.to_thread(window.get)
        bounds[:] = [int(start_s * 1e6), int(end_s * 1e6)]
        cpu0 = time.process_time()
        await asyncio.sleep(max(0.0, end_s + DRAIN_S - time.time()))
        counts["cpu_s"] = time.process_time() - cpu0
        if source is not None:
            await asyncio.to_thread(expand, frames, feed_times(source), hist, counts)
        out.put((hist, counts))
        for proto in sockets:
            proto.close()

    asyncio.run(main())


def expand(frames: array, sent: list[int], hist: array, counts: dict[str, int]) -> None:
    """Each entry of the frames kept by :func:`client_process` into ``hist``, at its own latency."""
    index = {t: i for i, t in enumerate(sent)}
    for j in range(0, len(frames), 4):
        now_us, first, last, n = frames[j : j + 4]
        i, k = index.get(first), index.get(last)
        if i is not None and k is not None and k - i + 1 == n:
            for t in sent[i : k + 1]:
                hist[min(TOP_BIN, max(0, (now_us - t) // BIN_US))] += 1
        else:  # not a run of consecutive entries: each at the oldest's latency (an upper bound)
            hist[min(TOP_BIN, max(0, (now_us - first) // BIN_US))] += n
            counts["bounded"] += n


def baseline_process(redis_url: str, key: bytes, window: Any, ready: Any, out: Any) -> None:
    """A bare redis-py XREAD BLOCK reader of the same stream: the latency floor."""
    import redis

    client = redis.Redis.from_url(redis_url, client_name="bench-baseline")
    last = (client.xrevrange(key, count=1) or [(b"0-0", None)])[0][0]
    hist = new_hist()
    ready.put(1)
    start, end = window.get()
    count = calls = 0
    while time.time() < end + DRAIN_S:
        reply = client.xread({key: last}, block=500, count=1000)
        now = time.time()
        calls += start <= now < end
        for _key, entries in reply or ():
            for entry_id, fields in entries:
                last = entry_id
                t = int(fields[b"t"]) / 1e6
                if start <= t < end:
                    record(hist, now - t)
                    count += 1
    out.put((hist, {"entries": count, "xread_calls": calls}))


def feeder_process(redis_url: str, key: bytes, rate: int, start: float, end: float) -> None:
    """XADD ``rate`` entries per second from ``start - WARMUP_S`` to ``end`` on a fixed schedule."""
    import redis

    client = redis.Redis.from_url(redis_url, client_name="bench-feeder")
    interval = 1.0 / rate
    due = start - WARMUP_S
    sent_us = 0
    while due < end:
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        sent_us = new_sent_us(sent_us)
        client.xadd(key, {"t": str(sent_us), "type": "order.created", "data": DATA}, maxlen=100_000,
                    approximate=True)
        due += interval


# ------------------------------------------------------------------------------- the server


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Web:
    """One uvicorn process serving ``busconsole.asgi``."""

    proc: subprocess.Popen
    port: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_web(env: dict[str, str], *, deflate: bool) -> Web:
    """uvicorn as ``make run`` starts it (``--ws websockets``), permessage-deflate as asked."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "busconsole.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--ws", "websockets", "--ws-per-message-deflate", "true" if deflate else "false", "--lifespan", "off",
         "--log-level", "warning"],
        cwd=REPO, env=env,
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Web(proc, port)
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("uvicorn exited") from None
            time.sleep(0.05)
    raise RuntimeError("uvicorn did not start")


def prepare_session() -> dict[str, str]:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client

    user = User.objects.create_user("bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"}


# --------------------------------------------------------------------------------- one case


def run_case(server: RedisServer, webs: list[Web], headers: dict[str, str], clients: int, rate: int,
             seconds: float, deflate: bool, filter_text: str | None = None) -> dict[str, Any]:
    """``clients`` websockets on one stream, spread evenly over the web processes ``webs``; with
    ``filter_text``, every other client tails through that filter (``?filter=``)."""
    import redis

    ctx = mp.get_context("spawn")
    key = f"bench:tail:{clients}:{rate}:{len(webs)}:{int(deflate)}".encode()
    monitor = redis.Redis.from_url(server.url(0), client_name="bench-monitor")
    path = f"/ws/c/default/streams/{key.decode().replace(':', '%3A')}/tail/"
    query = f"?{urlencode({'filter': filter_text})}" if filter_text else ""
    urls = [f"ws://127.0.0.1:{webs[i % len(webs)].port}{path}{query if i % 2 else ''}" for i in range(clients)]
    origin = f"http://127.0.0.1:{webs[0].port}"
    procs = 1 if clients <= 100 else 2
    ready, out = ctx.Queue(), ctx.Queue()
    windows = [ctx.Queue() for _ in range(procs + 1)]
    source = (server.url(0), [key])
    workers = [ctx.Process(target=client_process, args=(urls[i::procs], headers, origin, deflate, windows[i], ready, out,
                                                        source)) for i in range(procs)]
    workers.append(ctx.Process(target=baseline_process, args=(server.url(0), key, windows[-1], ready, out)))
    for w in workers:
        w.start()
    connected = sum(ready.get(timeout=120) for _ in workers) - 1
    assert connected == clients, connected

    start = time.time() + WARMUP_S + 0.5
    end = start + seconds
    for q in windows:
        q.put((start, end))
    feeder = ctx.Process(target=feeder_process, args=(server.url(0), key, rate, start, end))
    feeder.start()

    # Mid-run observations: Redis connections, XREAD calls, the servers' memory and CPU.
    time.sleep(max(0.0, start - time.time()))
    xread0 = monitor.info("commandstats").get("cmdstat_xread", {}).get("calls", 0)
    cpu0, rss_max = sum(proc_cpu_s(w.pid) for w in webs), sum(proc_rss_mb(w.pid) for w in webs)
    time.sleep(seconds / 2)
    listing = monitor.client_list()
    tail_conns = sum(1 for c in listing if c["name"].startswith("busconsole-tail"))
    # Every connection to the monitored database that is not the benchmark's own.
    all_conns = sum(1 for c in listing if c["db"] == "0" and not c["name"].startswith("bench-"))
    while time.time() < end:
        rss_max = max(rss_max, sum(proc_rss_mb(w.pid) for w in webs))
        time.sleep(0.25)
    cpu1 = sum(proc_cpu_s(w.pid) for w in webs)
    xread1 = monitor.info("commandstats").get("cmdstat_xread", {}).get("calls", 0)
    feeder.join()
    # One operator event through the channel layer: every client, in every process, must get it.
    time.sleep(max(0.0, end + 0.1 - time.time()))
    from streams_app.live.broadcast import stream_changed  # Django is set up by now (prepare_session)

    stream_changed("default", key, action="bench")

    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(30)
    base_hist, base_counts = next((h, c) for h, c in results if "clients" not in c)
    ws_results = [(h, c) for h, c in results if "clients" in c]
    ws_hist = merge([h for h, _ in ws_results])
    totals = {k: sum(c[k] for _, c in ws_results)
              for k in ("entries", "frames", "skipped", "skip_notes", "changed", "cpu_s", "bounded")}
    produced = base_counts["entries"]
    monitor.close()
    return {
        "clients": clients, "rate": rate, "webs": len(webs), "deflate": deflate,
        "ws_p50": percentile(ws_hist, 0.50), "ws_p99": percentile(ws_hist, 0.99), "ws_max": max_ms(ws_hist),
        "base_p50": percentile(base_hist, 0.50), "base_p99": percentile(base_hist, 0.99),
        "delivered": totals["entries"], "expected": produced * clients, "skipped": totals["skipped"],
        "skip_notes": totals["skip_notes"], "changed": totals["changed"], "bounded": totals["bounded"],
        "frames_per_entry": totals["frames"] / max(1, totals["entries"]),
        "tail_conns": tail_conns, "redis_conns": all_conns,
        # INFO commandstats is server-wide: the bare reader's own XREADs are taken out.
        "xread_per_s": (xread1 - xread0 - base_counts["xread_calls"]) / seconds,
        "rss_mb": rss_max, "cpu_pct": 100 * (cpu1 - cpu0) / seconds,
        # server CPU per entry delivered to one client, in microseconds: the cost that grows with clients
        "cpu_us_per_entry": 1e6 * (cpu1 - cpu0) / max(1, totals["entries"]),
        "client_cpu_pct": 100 * totals["cpu_s"] / (seconds + DRAIN_S),
    }


HEADER = (f"{'procs':>5} {'clients':>7} {'rate/s':>6} {'deflate':>7} | {'ws p50':>7} {'ws p99':>7} {'ws max':>7} | "
          f"{'xread p50':>9} {'p99':>6} | {'delivered':>9} {'skip notes':>10} {'counted':>7} {'changed':>7} "
          f"{'frames/entry':>12} | {'tail conns':>10} {'db0 conns':>9} {'XREAD/s':>7} | {'RSS MB':>6} {'CPU %':>5} "
          f"{'CPU us/entry':>12} {'clients CPU %':>13}")


def print_row(row: dict[str, Any]) -> None:
    share = row["delivered"] / max(1, row["expected"])
    changed = f"{row['changed']}/{row['clients']}"
    print(f"{row['webs']:>5} {row['clients']:>7} {row['rate']:>6} {'on' if row['deflate'] else 'off':>7} | "
          f"{fmt(row['ws_p50']):>7} {fmt(row['ws_p99']):>7} {fmt(row['ws_max']):>7} | "
          f"{fmt(row['base_p50'], '.2f'):>9} {fmt(row['base_p99'], '.2f'):>6} | {share:>9.1%} {row['skip_notes']:>10} "
          f"{row['skipped']:>7} {changed:>7} {row['frames_per_entry']:>12.3f} | "
          f"{row['tail_conns']:>10} {row['redis_conns']:>9} {row['xread_per_s']:>7.0f} | {row['rss_mb']:>6.0f} "
          f"{row['cpu_pct']:>5.0f} {row['cpu_us_per_entry']:>12.2f} {row['client_cpu_pct']:>13.0f}", flush=True)


# ------------------------------------------------------------------------------ the cluster case


def cluster_keys(n: int) -> list[bytes]:
    """``n`` keys in ``n`` different hash slots: no two may share an XREAD, and every node gets several."""
    from redis.crc import key_slot

    out: list[bytes] = []
    slots: set[int] = set()
    for i in range(100 * n):
        key = f"bench:tail:cluster:{i}".encode()
        if key_slot(key) not in slots:
            slots.add(key_slot(key))
            out.append(key)
            if len(out) == n:
                break
    return out


def cluster_baseline_process(cluster_url: str, keys: list[bytes], window: Any, ready: Any, out: Any) -> None:
    """The floor on a cluster: a bare ``XREAD BLOCK`` per key, each on a connection of its own to the key's node.

    XREAD cannot span slots, so this is the best any reader can see: one blocked connection per key
    (the console's hub may not do that: its connections are bounded by nodes).
    """
    import redis.asyncio as aioredis
    from redis.cluster import RedisCluster

    sync = RedisCluster.from_url(cluster_url)
    where = {key: sync.get_node_from_key(key) for key in keys}
    last = {key: (sync.xrevrange(key, count=1) or [(b"0-0", None)])[0][0] for key in keys}
    sync.close()

    async def main() -> None:
        hist = new_hist()
        counts = {"entries": 0, "xread_calls": 0}
        ready.put(1)
        start, end = await asyncio.to_thread(window.get)

        async def read(key: bytes) -> None:
            client = aioredis.Redis(host=where[key].host, port=where[key].port, client_name="bench-baseline")
            cursor = last[key]
            try:
                while time.time() < end + DRAIN_S:
                    reply = await client.xread({key: cursor}, block=500, count=1000)
                    now = time.time()
                    counts["xread_calls"] += start <= now < end
                    for _key, entries in reply or ():
                        for entry_id, fields in entries:
                            cursor = entry_id
                            t = int(fields[b"t"]) / 1e6
                            if start <= t < end:
                                record(hist, now - t)
                                counts["entries"] += 1
            finally:
                await client.aclose()

        await asyncio.gather(*(read(key) for key in keys))
        out.put((hist, counts))

    asyncio.run(main())


def cluster_feeder_process(cluster_url: str, keys: list[bytes], rate: int, start: float, end: float) -> None:
    """XADD ``rate`` entries per second in all, round robin over ``keys``, through a cluster client."""
    from redis.cluster import RedisCluster

    client = RedisCluster.from_url(cluster_url, client_name="bench-feeder")
    interval = 1.0 / rate
    due = start - WARMUP_S
    i = sent_us = 0
    while due < end:
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        sent_us = new_sent_us(sent_us)
        client.xadd(keys[i % len(keys)], {"t": str(sent_us), "type": "order.created", "data": DATA},
                    maxlen=100_000, approximate=True)
        i += 1
        due += interval


def xread_calls(monitors: list[Any]) -> int:
    return sum(m.info("commandstats").get("cmdstat_xread", {}).get("calls", 0) for m in monitors)


def run_cluster_case(cluster: Any, web: Web, headers: dict[str, str], clients: int,
                     n_keys: int, rate: int, seconds: float, deflate: bool) -> dict[str, Any]:
    """``clients`` websockets over ``n_keys`` streams in as many slots of a 3-primary cluster."""
    from urllib.parse import quote

    import redis

    ctx = mp.get_context("spawn")
    keys = cluster_keys(n_keys)
    monitors = [redis.Redis(port=p, client_name="bench-monitor") for p in cluster.ports]
    port = web.port
    origin = f"http://127.0.0.1:{port}"
    urls = [f"ws://127.0.0.1:{port}/ws/c/cluster/streams/{quote(keys[i % n_keys], safe='')}/tail/"
            for i in range(clients)]
    procs = 1 if clients <= 100 else 2
    ready, out = ctx.Queue(), ctx.Queue()
    windows = [ctx.Queue() for _ in range(procs + 1)]
    workers = [ctx.Process(target=client_process, args=(urls[i::procs], headers, origin, deflate, windows[i], ready,
                                                        out)) for i in range(procs)]
    for w in workers:
        w.start()
    connected = sum(ready.get(timeout=180) for _ in workers)
    assert connected == clients, connected

    # Idle: every client live, nothing written. What the multi-slot rounds cost when nothing happens.
    idle_s = 3.0
    xread0, cpu0 = xread_calls(monitors), proc_cpu_s(web.pid)
    time.sleep(idle_s)
    idle_xreads, idle_cpu = xread_calls(monitors) - xread0, proc_cpu_s(web.pid) - cpu0

    baseline = ctx.Process(target=cluster_baseline_process, args=(cluster.url(), keys, windows[-1], ready, out))
    baseline.start()
    ready.get(timeout=120)
    workers.append(baseline)

    start = time.time() + WARMUP_S + 0.5
    end = start + seconds
    for q in windows:
        q.put((start, end))
    feeder = ctx.Process(target=cluster_feeder_process, args=(cluster.url(), keys, rate, start, end))
    feeder.start()

    time.sleep(max(0.0, start - time.time()))
    xread0, cpu0, rss_max = xread_calls(monitors), proc_cpu_s(web.pid), proc_rss_mb(web.pid)
    per_node, slot_readers = [0] * len(monitors), [0] * len(monitors)
    while time.time() < end:  # the most tail connections each node saw, and of them slot readers
        rss_max = max(rss_max, proc_rss_mb(web.pid))
        for i, m in enumerate(monitors):
            names = [c["name"] for c in m.client_list() if c["name"].startswith("busconsole-tail")]
            per_node[i] = max(per_node[i], len(names))
            slot_readers[i] = max(slot_readers[i], names.count("busconsole-tail-slot"))
        time.sleep(0.25)
    cpu1, xread1 = proc_cpu_s(web.pid), xread_calls(monitors)
    feeder.join()

    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(30)
    base_hist, base_counts = next((h, c) for h, c in results if "clients" not in c)
    ws_results = [(h, c) for h, c in results if "clients" in c]
    ws_hist = merge([h for h, _ in ws_results])
    totals = {k: sum(c[k] for _, c in ws_results) for k in ("entries", "skip_notes")}
    # Every key gets the same share of the feed, round robin (multiplied first: 1000 / 30 * 30 is not 1000).
    for m in monitors:
        m.close()
    return {
        "clients": clients, "keys": n_keys, "rate": rate,
        "ws_p50": percentile(ws_hist, 0.50), "ws_p99": percentile(ws_hist, 0.99), "ws_max": max_ms(ws_hist),
        "base_p50": percentile(base_hist, 0.50), "base_p99": percentile(base_hist, 0.99),
        "delivered": totals["entries"], "expected": base_counts["entries"] * clients / n_keys, "skip_notes": totals["skip_notes"],
        "tail_conns": sum(per_node), "tail_conns_max_node": max(per_node), "nodes": len(monitors),
        "tail_conns_per_node": per_node, "slot_readers_per_node": slot_readers,
        "xread_per_s": (xread1 - xread0 - base_counts["xread_calls"]) / seconds,
        "idle_xread_per_s": idle_xreads / idle_s, "idle_cpu_pct": 100 * idle_cpu / idle_s,
        "rss_mb": rss_max, "cpu_pct": 100 * (cpu1 - cpu0) / seconds,
    }


def print_cluster(row: dict[str, Any], poll_ms: int) -> None:
    share = row["delivered"] / max(1, row["expected"])
    ratio = row["ws_p99"] / row["base_p99"] if row["ws_p99"] and row["base_p99"] else None
    bound = row["slot_readers_bound"]
    mode = f"slot readers (at most {bound} per node)" if bound else "polling fallback (no slot readers)"
    print(f"\nRedis Cluster ({row['nodes']} primaries), {mode}: {row['clients']} clients over {row['keys']} streams "
          f"in {row['keys']} slots, {row['rate']} entries/s in all, BUSCONSOLE_TAIL_POLL_MS={poll_ms}")
    print(f"  ws p50 / p99 / max      {fmt(row['ws_p50'])} / {fmt(row['ws_p99'])} / {fmt(row['ws_max'])} ms")
    print(f"  bare XREAD p50 / p99    {fmt(row['base_p50'], '.2f')} / {fmt(row['base_p99'], '.2f')} ms "
          f"(one blocked connection per key)")
    print(f"  ws p99 / bare p99       {fmt(ratio, '.1f')}x")
    print(f"  delivered               {share:.1%} ({row['skip_notes']} skip notes)")
    print(f"  hub Redis connections   per node {row['tail_conns_per_node']} (of them slot readers "
          f"{row['slot_readers_per_node']}; bound per node: {bound} + 2; clients: {row['clients']})")
    print(f"  XREAD/s fed / idle      {row['xread_per_s']:.0f} / {row['idle_xread_per_s']:.0f}")
    print(f"  server CPU fed / idle   {row['cpu_pct']:.0f} % / {row['idle_cpu_pct']:.0f} %, RSS {row['rss_mb']:.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case")
    parser.add_argument("--clients", type=int, nargs="*", default=None,
                        help="client counts, each at every --rates (default: 1, 100, 500 and 1,000 at 200/s)")
    parser.add_argument("--rates", type=int, nargs="*", default=list(RATES))
    parser.add_argument("--deflate", choices=("off", "both"), default="both",
                        help="off: no permessage-deflate (as `make run` serves); both: also one case with it, "
                             "server and clients negotiating it as browsers do, to show what it costs")
    parser.add_argument("--procs", choices=("1", "both"), default="both",
                        help="both: also 1,000 x 200/s and 500 x 1000/s over TWO web processes sharing one "
                             "channel layer")
    parser.add_argument("--pace-alt", default="30:12", metavar="PERCENT:MS",
                        help="also the 500- and 1,000-client cases at the lowest rate on a web process with "
                             "BUSCONSOLE_TAIL_FANOUT_PERCENT and BUSCONSOLE_TAIL_PACE_MAX_MS set so, printed beside "
                             "the defaults (not a goal); off: not run")
    parser.add_argument("--cluster", choices=("yes", "no", "only"), default="yes",
                        help="also (yes), never (no) or only (only) run the Redis Cluster case")
    parser.add_argument("--cluster-clients", type=int, default=100)
    parser.add_argument("--cluster-keys", type=int, default=100, help="streams, each in a slot of its own")
    parser.add_argument("--cluster-rate", type=int, default=200, help="entries/s over all the streams")
    parser.add_argument("--cluster-modes", choices=("both", "slot", "poll"), default="both",
                        help="the cluster case with slot readers, with the polling fallback only, or both")
    parser.add_argument("--slot-readers", type=int, default=None,
                        help="BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE of the slot-reader mode (default: the setting's)")
    parser.add_argument("--filter", default=None,
                        help="every other client tails through this filter (it must keep every entry to count "
                             "deliveries: the feed's entries are all type order.created)")
    parser.add_argument("--poll-ms", type=int, default=None,
                        help="BUSCONSOLE_TAIL_POLL_MS of the server (default: the setting's default)")
    args = parser.parse_args()
    if args.clients is None:
        cases = [(c, r) for c in CLIENTS for r in args.rates] + [c for c in EXTRA_CASES if c[1] in args.rates]
        two_process_cases = [c for c in TWO_PROCESS_CASES if c[1] in args.rates]
    else:
        cases = [(c, r) for c in args.clients for r in args.rates]
        two_process_cases = [(c, r) for c in args.clients for r in args.rates if c >= 500]
    if args.cluster == "only":
        cases, args.deflate, args.procs = [], "off", "1"

    server = RedisServer()
    cluster = RedisClusterServers() if args.cluster != "no" else None
    var_dir = tempfile.mkdtemp(prefix="busconsole-bench-tail-")
    webs: list[Web] = []
    started = time.perf_counter()
    try:
        server.start()
        connections = f"default={server.url(0)}"
        if cluster is not None:
            cluster.start()
            connections += f",cluster={cluster.url()}"
        env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", "BUS_REDIS_URL": server.url(0),
            "BUS_REDIS_URLS": connections,
            "REDIS_URL": server.url(1), "BUSCONSOLE_VAR_DIR": var_dir, "DEBUG": "0",
            "SECRET_KEY": "bench-only-" + os.urandom(16).hex(), "ALLOWED_HOSTS": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
        }
        if args.poll_ms is not None:
            env["BUSCONSOLE_TAIL_POLL_MS"] = str(args.poll_ms)
        os.environ.update(env)
        headers = prepare_session()
        webs.append(start_web(env, deflate=False))
        load = os.getloadavg()[0]
        print(f"tail benchmark: uvicorn (--ws websockets, pid {webs[0].pid}), redis-server {server.url(0)}, "
              f"{os.cpu_count()} cores, {args.seconds:.0f} s per case; load average before the run {load:.2f}")
        if load > 0.5:
            print("WARNING: other work is running on this machine: the figures below are pessimistic")
        print()
        rows = []
        if cases:
            print(HEADER + "\n" + "-" * len(HEADER))
        for clients, rate in cases:
            rows.append(run_case(server, webs[:1], headers, clients, rate, args.seconds, False, args.filter))
            print_row(rows[-1])
        if args.pace_alt != "off" and cases:
            share, cap = (int(v) for v in args.pace_alt.split(":"))
            alt = start_web({**env, "BUSCONSOLE_TAIL_FANOUT_PERCENT": str(share),
                             "BUSCONSOLE_TAIL_PACE_MAX_MS": str(cap)}, deflate=False)
            webs.append(alt)
            print(f"the same, BUSCONSOLE_TAIL_FANOUT_PERCENT={share} and BUSCONSOLE_TAIL_PACE_MAX_MS={cap} "
                  "(not a goal: what a higher share of the process buys):")
            for clients, rate in [c for c in cases if c[0] >= 500 and c[1] == min(args.rates)]:
                rows.append({**run_case(server, [alt], headers, clients, rate, args.seconds, False), "pace": (share, cap)})
                print_row(rows[-1])
        if args.deflate == "both" and cases:
            webs.append(start_web(env, deflate=True))
            rows.append(run_case(server, webs[-1:], headers, 100, 200, args.seconds, True))
            print_row(rows[-1])
        if args.procs == "both" and cases and two_process_cases:
            second = start_web(env, deflate=False)
            webs.append(second)
            for clients, rate in two_process_cases:
                rows.append(run_case(server, [webs[0], second], headers, clients, rate, args.seconds, False))
                print_row(rows[-1])
        if rows:
            print("\nlatencies in ms, XADD to frame received (ws) or to XREAD reply (bare redis-py reader, same run);"
                  "\nCPU us/entry: server CPU per entry delivered to one client; changed: clients that got one "
                  "operator event sent through the channel layer after the run")
            summarize(rows)
        if cluster is not None:
            from django.conf import settings

            bound = args.slot_readers if args.slot_readers is not None else settings.BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE
            modes = {"both": (bound, 0), "slot": (bound,), "poll": (0,)}[args.cluster_modes]
            cluster_rows = []
            for readers in modes:  # a web process per mode: the bound is read from its environment
                web = start_web({**env, "BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE": str(readers)}, deflate=False)
                try:
                    row = run_cluster_case(cluster, web, headers, args.cluster_clients, args.cluster_keys,
                                           args.cluster_rate, args.seconds, False)
                finally:
                    web.stop()
                row["slot_readers_bound"] = readers
                cluster_rows.append(row)
                print_cluster(row, args.poll_ms if args.poll_ms is not None else settings.BUSCONSOLE_TAIL_POLL_MS)
            summarize_cluster(cluster_rows)
    finally:
        for web in webs:
            web.stop()
        server.cleanup()
        if cluster is not None:
            cluster.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


#: The goals of docs/performance.md#goals-and-floors: (web processes, clients, entries/s, p99 within this
#: many times the bare XREAD's p99 of the same case), each also "all delivered, no skip".
GOALS = ((1, 100, 200, 1.5), (1, 500, 200, 3.0), (1, 100, 1000, 3.0), (1, 1000, 200, 5.0), (2, 1000, 200, 5.0))


def summarize(rows: list[dict[str, Any]]) -> None:
    """What deflate and a second process change, then the goals of docs/performance.md#goals-and-floors as ``make bench`` rows."""
    plain = {(r["webs"], r["clients"], r["rate"]): r for r in rows if not r["deflate"] and not r.get("pace")}
    for r in rows:
        base = plain.get((1, r["clients"], r["rate"]))
        if r.get("pace") and base:
            print(f"hand-outs at {r['pace'][0]} % of the process, waits up to {r['pace'][1]} ms, at {r['clients']} x "
                  f"{r['rate']}/s: p99 {fmt(r['ws_p99'])} vs bare {fmt(r['base_p99'], '.2f')} ms "
                  f"({fmt(p99_ratio(r), '.2f')}x) against {fmt(base['ws_p99'])} vs {fmt(base['base_p99'], '.2f')} ms "
                  f"({fmt(p99_ratio(base), '.2f')}x) with the defaults; server CPU {r['cpu_pct']:.0f} % vs "
                  f"{base['cpu_pct']:.0f} %, frames/entry {r['frames_per_entry']:.3f} vs {base['frames_per_entry']:.3f}")
            continue
        if r["deflate"] and base:
            print(f"permessage-deflate at {r['clients']} x {r['rate']}/s: server CPU "
                  f"{r['cpu_us_per_entry']:.1f} us/entry vs {base['cpu_us_per_entry']:.1f} without "
                  f"({r['cpu_us_per_entry'] / max(1e-9, base['cpu_us_per_entry']):.1f}x), p99 {fmt(r['ws_p99'])} "
                  f"vs {fmt(base['ws_p99'])} ms")
        if r["webs"] > 1 and base:
            print(f"{r['webs']} web processes at {r['clients']} x {r['rate']}/s: delivered "
                  f"{r['delivered'] / max(1, r['expected']):.1%} vs {base['delivered'] / max(1, base['expected']):.1%}, "
                  f"p99 {fmt(r['ws_p99'])} vs {fmt(base['ws_p99'])} ms with one")
    for webs, clients, rate, ratio in GOALS:
        r = plain.get((webs, clients, rate))
        if r is None:
            continue
        name = f"tail p99, {clients} clients x {rate}/s"
        if webs > 1:
            one = plain.get((1, clients, rate))
            beside = (f" (one process: p99 {fmt(one['ws_p99'])} vs {fmt(one['base_p99'], '.2f')} ms)" if one and
                      one["ws_p99"] and one["base_p99"] else "")
            name = f"tail p99, {clients} clients x {rate}/s over {webs} web processes{beside}"
        if r["ws_p99"] is None or not r["base_p99"]:
            check(name, "no entry received", f"<= {ratio:g}x bare XREAD p99", False)
        else:
            within(name, r["ws_p99"], r["base_p99"], ratio)
        share = r["delivered"] / max(1, r["expected"])
        where = f"{clients} clients x {rate}/s" + (f" over {webs} web processes" if webs > 1 else "")
        bounded = f", {r['bounded']:,} at their frame's oldest latency" if r.get("bounded") else ""
        check(f"tail all delivered, {where}",
              f"{share:.2%}, {r['skip_notes']} skip notes{bounded}", "100%, no skips",
              r["delivered"] >= r["expected"] and r["skip_notes"] == 0)


def summarize_cluster(rows: list[dict[str, Any]]) -> None:
    """The cluster goals (docs/performance.md#goals-and-floors): slot readers within 3x of one bare blocked
    XREAD per key; every mode delivers all, with its connections per node within its bound."""
    for r in rows:
        bound = r["slot_readers_bound"]
        mode = "slot readers" if bound else "polling fallback"
        where = f"{r['clients']} clients over {r['keys']} slots, {mode}"
        if bound:
            if r["ws_p99"] is None or not r["base_p99"]:
                check(f"cluster tail p99, {where}", "no entry received", "<= 3x bare XREAD p99", False)
            else:
                within(f"cluster tail p99, {where}", r["ws_p99"], r["base_p99"], 3.0)
        share = r["delivered"] / max(1, r["expected"])
        check(f"cluster tail all delivered, {where}",
              f"{share:.2%} ({r['delivered']:,} of {r['expected']:,.0f}), {r['skip_notes']} skip notes", "100%, no skips",
              r["delivered"] >= r["expected"] and r["skip_notes"] == 0)
        check(f"cluster tail connections per node, {where}", f"at most {r['tail_conns_max_node']}",
              f"<= {bound + 2}", r["tail_conns_max_node"] <= bound + 2)


def p99_ratio(row: dict[str, Any]) -> float | None:
    return row["ws_p99"] / row["base_p99"] if row["ws_p99"] and row["base_p99"] else None


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


if __name__ == "__main__":
    sys.exit(main())
