"""The progress SSE endpoint over real HTTP: uvicorn serving busconsole's ASGI app, httpx as the client.

Progress streams are written with eventbus (as a task would); what the client must receive is read
from Redis with XRANGE, never from the code under test. The client disconnects mid-stream and
resumes with ``Last-Event-ID``, as a browser's EventSource does. Nothing is timed: reads are
bounded by event counts, and the HTTP client's timeout only turns a hang into a failure.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from eventbus import Bus
from tests.conftest import session_cookie
from tests.console.helpers import seg
from tests.polling import wait_for

TIMEOUT = httpx.Timeout(30.0)


@dataclass(frozen=True)
class Message:
    id: str | None
    event: str | None
    data: str


def events_url(server, key: bytes, *, conn: str = "default") -> str:
    return f"{server.url}/c/{conn}/progress/{seg(key)}/events/"


def messages(response: httpx.Response) -> Iterator[Message]:
    """Parse an SSE body as it arrives; comments and ``retry:`` are skipped."""
    fields: dict[str, list[str]] = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                yield Message(
                    id=fields.get("id", [None])[-1],
                    event=fields.get("event", [None])[-1],
                    data="\n".join(fields["data"]),
                )
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)


def read(stream: Iterator[Message], count: int) -> list[Message]:
    got: list[Message] = []
    for message in stream:
        got.append(message)
        if len(got) == count:
            break
    return got


def stored(r: redis.Redis, key: bytes) -> list[tuple[str, str, str]]:
    return [
        (entry_id.decode(), fields[b"event"].decode(), fields[b"data"].decode())
        for entry_id, fields in r.xrange(key)
    ]


def as_tuples(got: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.id, m.event, m.data) for m in got]


@pytest.fixture
def bus(r: redis.Redis) -> Iterator[Bus]:
    instance = Bus.from_url(os.environ["BUS_REDIS_URL"])
    yield instance
    instance.close()


@pytest.fixture
def http(asgi_server, viewer) -> Iterator[httpx.Client]:
    with httpx.Client(cookies=session_cookie(viewer), timeout=TIMEOUT) as client:
        yield client


def test_disconnect_and_resume_with_last_event_id(
    asgi_server, http: httpx.Client, bus: Bus, r: redis.Redis
) -> None:
    key = b"progress:report-7"
    task = bus.progress("report-7")
    task.start({"steps": 8})
    task.delta({"step": 1})
    task.delta({"step": 2})

    with http.stream("GET", events_url(asgi_server, key)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        stream = messages(response)
        first = read(stream, 3)  # the replay
        assert as_tuples(first) == stored(r, key)
        task.delta({"step": 3})  # followed live
        first += read(stream, 1)
    # The client is gone mid-stream; the task goes on without it.
    assert as_tuples(first) == stored(r, key)
    for step in range(4, 9):
        task.delta({"step": step})
    task.done({"rows": 1234})

    resume_from = first[-1].id
    with http.stream("GET", events_url(asgi_server, key), headers={"Last-Event-ID": resume_from}) as response:
        assert response.status_code == 200
        rest = list(messages(response))  # the server ends the response after the terminal event

    everything = stored(r, key)
    assert as_tuples(rest) == everything[len(first) :]
    assert as_tuples(first + rest) == everything
    assert rest[-1].event == "done"

    # Resuming after the terminal event: 204, so that EventSource stops reconnecting.
    response = http.get(events_url(asgi_server, key), headers={"Last-Event-ID": rest[-1].id})
    assert response.status_code == 204


def test_resume_from_any_id_gives_exactly_the_remaining_events(
    asgi_server, http: httpx.Client, bus: Bus, r: redis.Redis
) -> None:
    key = b"progress:finished"
    with bus.progress("finished") as task:
        for step in range(5):
            task.delta({"step": step})
    everything = stored(r, key)
    for position, (entry_id, _, _) in enumerate(everything[:-1]):
        with http.stream(
            "GET", events_url(asgi_server, key), headers={"Last-Event-ID": entry_id}
        ) as response:
            assert as_tuples(list(messages(response))) == everything[position + 1 :]
    # ?after= gives the first position; Last-Event-ID wins over it on a reconnect.
    with http.stream("GET", events_url(asgi_server, key) + f"?after={everything[1][0]}") as response:
        assert as_tuples(list(messages(response))) == everything[2:]
    url = events_url(asgi_server, key) + f"?after={everything[1][0]}"
    with http.stream("GET", url, headers={"Last-Event-ID": everything[3][0]}) as response:
        assert as_tuples(list(messages(response))) == everything[4:]


@pytest.mark.slow
def test_a_disconnected_follower_stops_reading(
    asgi_server, http: httpx.Client, bus: Bus, r: redis.Redis, settings
) -> None:
    # Other tests' readers may still block on the shared server: the console's connections of this
    # test get a name of their own (redis-py takes client_name from the URL's query), and only
    # connections of that name are counted.
    name = f"progress-sse-{uuid.uuid4().hex}"
    base = settings.BUS_REDIS_URLS["default"]
    assert "?" not in base
    settings.BUS_REDIS_URLS = {**settings.BUS_REDIS_URLS, "default": f"{base}?client_name={name}"}
    task = bus.progress("idle")
    task.start()

    def blocked_readers(client_name: str = name) -> int:
        clients = r.client_list()
        return sum(1 for c in clients if c["name"] == client_name and "b" in c["flags"] and c["cmd"] == "xread")

    # Someone else blocked in XREAD on the same server all along: not counted.
    stranger = redis.Redis.from_url(base, client_name=f"stranger-{name}")
    waiting = threading.Thread(target=stranger.xread, args=({b"elsewhere": "$"},), kwargs={"block": 60_000})
    waiting.start()
    try:
        wait_for(lambda: blocked_readers(f"stranger-{name}") == 1, timeout=10,
                 what="the stranger to block in XREAD")
        with http.stream("GET", events_url(asgi_server, b"progress:idle")) as response:
            # The parser is kept for the whole block: a generator dropped after one message is
            # closed at once, and closing it closes httpx's half-read response, which hangs up.
            stream = messages(response)
            assert as_tuples(read(stream, 1)) == stored(r, b"progress:idle")
            wait_for(lambda: blocked_readers() == 1, timeout=10, what="the follower to block in XREAD")
            # Still connected, so still followed: an event written now arrives.
            task.delta({"step": 1})
            assert as_tuples(read(stream, 1)) == stored(r, b"progress:idle")[1:]
            wait_for(lambda: blocked_readers() == 1, timeout=10, what="the follower to block again")
        # Once the client has gone, the server stops blocking in XREAD for it (after one block at most).
        wait_for(lambda: blocked_readers() == 0, timeout=10,
                 what="the server to stop reading for the gone client")
        assert blocked_readers(f"stranger-{name}") == 1
    finally:
        for c in r.client_list():
            if c["name"] == f"stranger-{name}":
                r.client_unblock(int(c["id"]))
        waiting.join(10)
        stranger.close()


def test_errors(asgi_server, http: httpx.Client, bus: Bus, r: redis.Redis) -> None:
    bus.progress("x").start()
    assert http.get(events_url(asgi_server, b"progress:nope")).status_code == 404
    r.set("not-a-stream", "1")
    assert http.get(events_url(asgi_server, b"not-a-stream")).status_code == 404
    bad = http.get(events_url(asgi_server, b"progress:x"), headers={"Last-Event-ID": "yesterday"})
    assert bad.status_code == 400
    assert http.get(events_url(asgi_server, b"progress:x", conn="nope")).status_code == 404
    assert http.post(events_url(asgi_server, b"progress:x")).status_code in (403, 405)  # CSRF or method


def test_login_required(asgi_server, bus: Bus) -> None:
    bus.progress("x").start()
    with httpx.Client(timeout=TIMEOUT) as anonymous:
        response = anonymous.get(events_url(asgi_server, b"progress:x"))
    assert response.status_code == 302
    assert "/login/" in response.headers["location"]
