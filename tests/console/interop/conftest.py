"""Fixtures for the interop tests: the libraries' own venv (``.venv-interop``, built on first use by
``scripts/interop_env.py`` when ``make test`` has not), a starter for their scripts, and the URL of the
monitored database (db 0, emptied by ``r`` first) for the libraries to connect to."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.console.interop.helpers import LibraryProcess
from tests.servers import REPO


@pytest.fixture(scope="session")
def interop_python() -> Path:
    spec = importlib.util.spec_from_file_location("interop_env", REPO / "scripts" / "interop_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ensure()


@pytest.fixture
def url(redis_server, r: redis.Redis) -> str:
    """The monitored database's URL (db 0), emptied by ``r`` first, for the libraries to connect to."""
    return redis_server.url(0)


@pytest.fixture
def library(interop_python: Path, url: str, tmp_path: Path) -> Iterator[Callable[..., LibraryProcess]]:
    """``library(script, scenario, env=..., **arguments)`` starts a library script against ``url``, in
    ``tmp_path``; any still running at the end of the test is killed."""
    started: list[LibraryProcess] = []

    def start(script: str, scenario: str, *, env: dict[str, str] | None = None, **arguments: Any) -> LibraryProcess:
        process = LibraryProcess(interop_python, script, scenario, url, cwd=tmp_path, env=env, **arguments)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def run_library(library: Callable[..., LibraryProcess]) -> Callable[..., dict[str, Any]]:
    """``run_library(script, scenario, **arguments)``: run a scenario to its end; its one JSON line."""

    def run(script: str, scenario: str, **arguments: Any) -> dict[str, Any]:
        process = library(script, scenario, **arguments)
        result = process.read()
        process.finish()
        return result

    return run
