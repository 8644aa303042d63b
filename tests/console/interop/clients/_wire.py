"""The interop client scripts' side of their talk with the test: run in ``.venv-interop``, not the console's venv.

A script is started as ``python <script> <scenario> <redis url>`` and reads its arguments, one JSON
object, from the first line of stdin (an argument may be bigger than the command line allows). It
writes one JSON object a line to stdout (:func:`emit`) and may wait for a word the test writes to its
stdin after that (:class:`Commands`). It imports nothing of the console: only its own library, redis-py as that library
brought it, and ``tests.polling`` (plain Python) for bounded waits.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))  # for tests.polling only

WAIT = 20.0  # seconds: a generous bound for a library to do a few milliseconds of work


def emit(**values: Any) -> None:
    """One JSON line to the test."""
    sys.stdout.write(json.dumps(values) + "\n")
    sys.stdout.flush()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


class Commands:
    """The words the test writes to stdin, one a line, each an event a scenario may wait for."""

    def __init__(self) -> None:
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def event(self, word: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(word, threading.Event())

    def _read(self) -> None:
        for line in sys.stdin:
            self.event(line.strip()).set()

    async def wait(self, word: str, timeout: float = 60) -> None:
        event = self.event(word)
        deadline = asyncio.get_running_loop().time() + timeout
        while not event.is_set():
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"the test never said {word!r}")
            await asyncio.sleep(0.02)


def main(scenarios: dict[str, Callable[..., Coroutine[Any, Any, None]]]) -> None:
    """Run the scenario named on the command line with the URL and the JSON arguments."""
    name, url = sys.argv[1], sys.argv[2]
    arguments = json.loads(sys.stdin.readline())
    asyncio.run(scenarios[name](url, **arguments))
