"""The resident Spark driver: ``python -m pipeline.service --socket var/spark.sock``.

A pipeline run in a fresh JVM (``python -m pipeline``, :mod:`pipeline.main`) pays, on top of the JVM's
start, for generating and compiling its queries' code and for the JIT compiling Spark's code paths
while it runs them. This process keeps one SparkSession between runs, with room for every query's
generated classes (:data:`pipeline.session.RESIDENT_CONF`) and the optimizing JIT compiler on
(:data:`pipeline.session.RESIDENT_JVM`), so a run after its first reuses that work: from its second run on, the jobs take less than half the time
they take in a fresh JVM (docs/performance.md#figures-behind-the-design). The price is the JVM's memory
between runs: its heap stays at the size the runs grew it to, below the default ``spark.driver.memory``
(``bench/pipeline.py`` prints it). A full collection after each run with a heap that shrinks after it
(``-XX:MaxHeapFreeRatio=30``), or G1, kept less memory but made the next runs slower; so the heap is
left alone, and ``spark.driver.memory`` is what bounds it.

The console (:func:`streams_app.lake.run.spark_jobs`) hands a run's Spark jobs to this service when one
answers at ``BUSCONSOLE_SPARK_SERVICE``, and starts ``python -m pipeline`` in a child process otherwise;
``make run`` starts the service beside the worker.

**Protocol.** A Unix stream socket (created by this process, readable by its user only). A client
sends one JSON line, ``{"lake": uri, "as_of": iso, "master": m, "conf": {...}}`` (optionally ``"out"``
and ``"jobs"``, as ``python -m pipeline`` takes them), and reads the same JSON lines that command
prints (a line per job, the figures, an ``{"error": ...}`` line on failure), then ``{"exit": 0}`` or
``{"exit": 1}``. A request the running session cannot serve as asked is answered with one line,
``{"unserved": reason}``, at once, before anything runs: another master, or an option that cannot
change in a running session (the driver's memory, JVM flags, a static SQL option) with another
value than the session has. The console then runs the jobs in a child as before. Options that can
change (``spark.sql.shuffle.partitions`` and the like) apply to that run only.

One run at a time: a second client waits in the socket's backlog until the first run ends (the
console's runs are serialized by the pipeline lock anyway). A client that closes its end, as the
console does when a run is cancelled or loses its lock, cancels its run: the jobs are interrupted
and the session stays up for the next run.

**Why not Spark Connect**, whose server jar ships with pyspark: the jobs use the driver's JVM
directly (Hadoop's file system for listing and sizing the lake, job tags to cancel one run's jobs,
:class:`pyspark.InheritableThread` lanes), which a Connect client does not have, and the console
would need its gRPC client libraries. The server here is the standard library's
:class:`socketserver.UnixStreamServer`; what is written by hand is the request's checks and the
session's options per run.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `pipeline` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import socketserver  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from dataclasses import asdict  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from pipeline import conf as spark_conf  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("pipeline.service")

#: The longest request line read (a lake URI, a handful of options).
MAX_REQUEST = 64 * 1024
#: How long a client has to send its request once connected: one that connects and says nothing must
#: not hold the service (runs are served one at a time).
REQUEST_TIMEOUT_S = 5.0


class RunCancelled(Exception):
    """The client went away while its run was in progress."""


class Unserved(Exception):
    """The request asks for something the running session cannot give; the message says what."""


def _request(line: bytes) -> dict[str, Any]:
    """The request line, checked; raises ValueError with what is wrong."""
    try:
        request = json.loads(line)
    except ValueError:
        raise ValueError("the request is not a JSON line") from None
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    for key in ("lake", "master"):
        if not isinstance(request.get(key), str) or not request[key]:
            raise ValueError(f"the request needs {key!r} (a string)")
    options = request.get("conf") or {}
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise ValueError("'conf' must be an object of strings")
    request["conf"] = spark_conf.parse_items(f"{k}={v}" for k, v in options.items())
    as_of = request.get("as_of")
    if as_of is not None and not isinstance(as_of, str):
        raise ValueError("'as_of' must be an ISO-8601 string")
    request["as_of"] = datetime.fromisoformat(as_of.replace("Z", "+00:00")) if as_of else datetime.now(UTC)
    if request.get("out") is not None and not isinstance(request["out"], str):
        raise ValueError("'out' must be a string")
    jobs = request.get("jobs")
    if jobs is not None and (not isinstance(jobs, list) or not all(isinstance(j, str) for j in jobs)):
        raise ValueError("'jobs' must be a list of job names")
    return request


class Driver:
    """One SparkSession, started by the first run and kept for the next ones."""

    def __init__(self, master: str, conf: Mapping[str, str]) -> None:
        self.master = master
        self.conf = dict(conf)
        self.spark: SparkSession | None = None
        self.runs = 0

    def session(self):  # -> SparkSession
        if self.spark is None:
            from pipeline import session

            self.spark = session.build_session(self.master, conf=self.conf, resident=True)
        return self.spark

    def changes(self, master: str, options: Mapping[str, str]) -> dict[str, str]:
        """The options to set for a run asking for ``master`` and ``options``; raises :class:`Unserved`."""
        if master != self.master:
            raise Unserved(f"the service runs on {self.master}, the run asks for {master}")
        # a session not started yet starts with the service's options: the run's must be ones it can change
        spark = self.session()
        changes: dict[str, str] = {}
        for key, value in options.items():
            if spark.conf.get(key, None) == value:
                continue
            if not spark.conf.isModifiable(key):
                raise Unserved(
                    f"{key}={value} differs from the service's session "
                    f"({spark.conf.get(key, None) or 'not set'}) and cannot change while it runs"
                )
            changes[key] = value
        return changes

    def run(self, request: dict[str, Any], changes: Mapping[str, str], emit, check) -> dict[str, Any]:
        """Run the jobs with ``changes`` set for this run only; the run's figures."""
        from pipeline import main, session

        spark = self.session()
        saved = {key: spark.conf.get(key, None) for key in (*changes, session.AUTO_PARTITIONS)}
        try:
            for key, value in changes.items():
                spark.conf.set(key, value)
            if session.SHUFFLE_PARTITIONS in changes:
                spark.conf.set(session.AUTO_PARTITIONS, "false")  # the run chose them: not sized
            compiled = self._compiled()
            started = time.monotonic()
            main.run_all(
                spark, request["lake"], request.get("out"), as_of=request["as_of"],
                jobs=request.get("jobs") or main.JOBS,
                on_step=lambda result: emit(asdict(result)), check=check,
            )
            return {
                "jobs_s": round(time.monotonic() - started, 3),
                "shuffle_partitions": int(spark.conf.get(session.SHUFFLE_PARTITIONS)),
                "classes_compiled": self._compiled() - compiled,
            }
        finally:
            for key, value in saved.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
            self.runs += 1

    def _compiled(self) -> int:
        """Classes Spark has generated and compiled in this JVM so far (a run that finds them all in its
        cache compiles only those whose code holds the run's ``as_of``)."""
        assert self.spark is not None  # asked only of a started driver
        metrics = self.spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]  # a live context has its JVM view
        return int(metrics.METRIC_COMPILATION_TIME().getCount())

    def alive(self) -> bool:
        """False when the session's JVM is gone (killed, out of memory): this process cannot start
        another, as PySpark keeps one gateway per process, so the service restarts itself."""
        if self.spark is None:
            return True
        try:
            self.spark.sparkContext._jvm.java.lang.System.nanoTime()  # type: ignore[union-attr]  # a live SparkContext has its JVM view
        except Exception:  # noqa: BLE001 - py4j's errors for a JVM that does not answer
            return False
        return True

    def stop(self) -> None:
        if self.spark is not None:
            with contextlib.suppress(Exception):  # a JVM already gone
                self.spark.stop()
            self.spark = None


class Handler(socketserver.StreamRequestHandler):
    server: Server

    def handle(self) -> None:
        self.connection.settimeout(REQUEST_TIMEOUT_S)
        try:
            line = self.rfile.readline(MAX_REQUEST + 1)
        except TimeoutError:
            log.warning("a client connected and sent no request within %.0f s", REQUEST_TIMEOUT_S)
            return
        if not line:
            return  # the client left before asking (a run cancelled while it waited)
        self.connection.settimeout(None)  # a run takes as long as it takes
        try:
            if len(line) > MAX_REQUEST:
                raise ValueError(f"the request is longer than {MAX_REQUEST} bytes")
            request = _request(line)
        except (ValueError, spark_conf.ConfError) as exc:
            self.emit({"error": f"bad request: {exc}"})
            self.emit({"exit": 2})
            return
        driver = self.server.driver
        if not driver.alive():
            log.error("the session's JVM is gone: restarting")
            self.server.restart = True
            self.emit({"unserved": "the resident driver's JVM is gone; the driver restarts"})
            return
        started = time.monotonic()
        cold = driver.spark is None
        try:
            changes = driver.changes(request["master"], request["conf"])
        except Unserved as exc:
            self.emit({"unserved": str(exc)})
            return
        except Exception as exc:  # noqa: BLE001 - said to the client; the next run tries again
            from pipeline.main import _brief

            if cold:
                driver.stop()  # it did not start: the next run starts it again
            elif not driver.alive():
                self.server.restart = True
            reason = "Spark did not start" if cold else "the session did not answer"
            self.emit({"error": f"{reason}: {_brief(exc)}"})
            self.emit({"exit": 1})
            return
        self.emit({
            "spark_startup_s": round(time.monotonic() - started, 3) if cold else 0.0,
            "master": driver.session().sparkContext.master, "resident": True, "run": driver.runs + 1,
        })
        gone = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(gone,), name="client-watch", daemon=True)
        watcher.start()

        def check() -> None:
            if gone.is_set():
                raise RunCancelled("the client closed the connection")

        try:
            figures = driver.run(request, changes, self.emit, check)
        except Exception as exc:  # noqa: BLE001 - the client hears why; the service serves the next run
            from pipeline.main import _brief

            log.warning("run failed: %s", _brief(exc))
            self._try_emit({"error": _brief(exc)})
            self._try_emit({"exit": 1})
            if not driver.alive():
                log.error("the session's JVM is gone: restarting")
                self.server.restart = True
            return
        self._try_emit(figures)
        self._try_emit({"exit": 0})

    def _watch(self, gone: threading.Event) -> None:
        """Set ``gone`` when the client closes its end (it sends nothing after its request)."""
        try:
            while self.connection.recv(4096):
                pass
        except OSError:
            pass
        gone.set()

    def emit(self, item: dict[str, Any]) -> None:
        self.wfile.write(json.dumps(item).encode() + b"\n")
        self.wfile.flush()

    def _try_emit(self, item: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # the client is gone: nobody to tell
            self.emit(item)


class Server(socketserver.UnixStreamServer):
    def __init__(self, path: str, driver: Driver) -> None:
        self.driver = driver
        self.restart = False  # set by a request that found the JVM gone
        _clear_stale(path)
        old = os.umask(0o177)  # the socket is the service's user's alone
        try:
            super().__init__(path, Handler)
        finally:
            os.umask(old)

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001 - socketserver's signature
        log.exception("a client's request failed")


def _clear_stale(path: str) -> None:
    """Remove a socket file left by a service that died; refuse when one answers there."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SystemExit(f"{path} exists and is not a socket: not removing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody listens: a leftover
    else:
        raise SystemExit(f"another Spark service answers at {path}")
    finally:
        probe.close()


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="Where to listen (a Unix socket path).")
    parser.add_argument("--master", help="Spark master (default: $SPARK_MASTER or local[*]).")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="A Spark option (repeatable), over $BUSCONSOLE_SPARK_CONF.")
    args = parser.parse_args(argv)
    try:
        args.conf = {**spark_conf.parse_list(os.environ.get("BUSCONSOLE_SPARK_CONF", "")),
                     **spark_conf.parse_items(args.conf)}
    except spark_conf.ConfError as exc:
        parser.error(str(exc))
    args.master = args.master or os.environ.get("SPARK_MASTER") or "local[*]"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    driver = Driver(args.master, args.conf)
    server = Server(args.socket, driver)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # out of serve_forever, or out of the run in progress (it is cancelled)

    signal.signal(signal.SIGTERM, stop)
    log.info("serving Spark runs on %s (master %s; the session starts with the first run)", args.socket, args.master)
    try:
        while not server.restart:
            server.handle_request()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.socket)
        driver.stop()
    if server.restart:
        logging.shutdown()
        # the same process, afresh: a supervisor (make run, compose) sees no exit, and a new JVM starts
        # with the next run
        os.execv(sys.executable, [sys.executable, "-m", "pipeline.service", *(argv or sys.argv[1:])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
