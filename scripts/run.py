"""The `make run` supervisor: Redis, migrations, an admin user, then web, Celery workers and beat, demo traffic.

Standard library only. Unless REDIS_URL and BUS_REDIS_URL (or BUS_REDIS_URLS) point at a Redis of yours,
a private redis-server is started under var/redis/ on 127.0.0.1:$BUSCONSOLE_REDIS_PORT (default 6390).
Every service runs in its own process group with its output prefixed by its name. Ctrl-C, SIGTERM or
SIGHUP stops everything this script started (SIGTERM to each service, SIGKILL to whatever is left of its
process group after a grace period; a second Ctrl-C kills at once), and so does the unexpected exit of
any one service.

Environment: HOST (127.0.0.1), PORT (8000), BUSCONSOLE_REDIS_PORT (6390), BUSCONSOLE_DEMO (1 when the
monitored bus is the private server, else 0: demo traffic is never written into your Redis unasked).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a file: the project's packages are beside scripts/

from busconsole.env import PRIVATE_PORT, PRIVATE_PORT_VARIABLE  # noqa: E402 - needs the path above

PYTHON = sys.executable
GRACE_S = 10.0


def celery_workers() -> list[tuple[str, list[str]]]:
    """The Celery workers, one per queue (``busconsole/celery.py`` says why): ``upkeep`` takes only the
    beat's tasks (snapshots, mirror sync, resumes, retention, alert webhooks), ``jobs`` only background
    jobs, so a job never holds the worker a snapshot needs. Two slots each: a long mirror sync leaves
    a slot for the next snapshot, and two job slots with one job per user (BUSCONSOLE_JOBS_PER_USER)
    leave one user's export beside another's replay. The queue names are the settings'
    BUSCONSOLE_BEAT_QUEUE and BUSCONSOLE_JOBS_QUEUE (this script imports no Django; a test holds them equal).
    """
    worker = [PYTHON, "-m", "celery", "-A", "busconsole", "worker", "-l", "info", "--concurrency", "2"]
    return [
        ("upkeep", [*worker, "-Q", "busconsole-beat", "-n", "upkeep@%h"]),
        ("jobs", [*worker, "-Q", "busconsole-jobs", "-n", "jobs@%h"]),
        ("beat", [PYTHON, "-m", "celery", "-A", "busconsole", "beat", "-l", "info"]),
    ]

stop_requested = threading.Event()
hurry = threading.Event()
_print_lock = threading.Lock()


class Fatal(Exception):
    """A failure explained to the user by its message."""


def say(name: str, line: str) -> None:
    with _print_lock:
        try:
            sys.stdout.write(f"{name:<6} | {line}\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # a closed terminal or pipe (`make run | tee`, Ctrl-C) must not stop the cleanup


def log(message: str) -> None:
    say("run", message)


def on_signal(signum: int, frame: object) -> None:
    if stop_requested.is_set():
        hurry.set()
    stop_requested.set()


class Child:
    """A service started by us, leading its own process group; its output is copied with a prefix."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.process = subprocess.Popen(
            argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", process_group=0,
        )
        self.pump = threading.Thread(target=self._copy_output, daemon=True)
        self.pump.start()

    def _copy_output(self) -> None:
        assert self.process.stdout is not None  # started with stdout=PIPE
        for line in self.process.stdout:
            say(self.name, line.rstrip("\n"))

    def exited(self) -> int | None:
        """The leader's exit code once it has exited (the group may still hold stragglers)."""
        return self.process.poll()

    def alive(self) -> bool:
        """True while anything of its process group is left (celery's pool processes, say)."""
        self.process.poll()  # reap the leader so a zombie does not count
        return self._signal_group(0)

    def terminate(self) -> None:
        # The leader only: a Celery worker's warm shutdown stops its own pool, and breaks if the pool
        # processes are signalled at the same time.
        if self.process.poll() is None:
            self.process.terminate()

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.process.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


class Adopted:
    """Our private redis-server left running by an earlier run that died: reused, and stopped at exit."""

    def __init__(self, name: str, pid: int) -> None:
        self.name, self.pid = name, pid

    def exited(self) -> int | None:
        return None if self.alive() else -1

    def alive(self) -> bool:
        return self._signal(0)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> bool:
        try:
            os.kill(self.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


def stop(services: list) -> None:
    """SIGTERM each service, wait up to GRACE_S, then SIGKILL whatever is left of its process group."""
    running = [s for s in services if s.alive()]
    for service in reversed(running):
        log(f"stopping {service.name}")
        service.terminate()
    deadline = time.monotonic() + GRACE_S
    while any(s.alive() for s in running) and time.monotonic() < deadline and not hurry.is_set():
        time.sleep(0.1)
    for service in running:
        if service.alive():
            log(f"{service.name} did not stop: killing it")
            service.kill()
        if isinstance(service, Child):
            service.process.wait()
            service.pump.join(timeout=1)


def redis_answer(port: int) -> bool | None:
    """True if a Redis answers PING on 127.0.0.1:port, None if nothing listens, False for anything else."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except ConnectionRefusedError:
        return None
    except OSError:
        return False


def our_redis_pid(pidfile: Path, port: int) -> int | None:
    """The pid in our pidfile if that process is a redis-server on our port."""
    try:
        pid = int(pidfile.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:  # redis-server titles itself "redis-server 127.0.0.1:<port>"
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid  # no /proc: trust the live pid
    return pid if b"redis-server" in cmdline and f":{port}".encode() in cmdline else None


def private_redis(port: int, var_dir: Path) -> Child | Adopted:
    directory = var_dir / "redis"
    directory.mkdir(parents=True, exist_ok=True)
    pidfile = directory / "redis.pid"
    answer = redis_answer(port)
    if answer is not None:
        pid = our_redis_pid(pidfile, port)
        if answer and pid:
            log(f"reusing our redis-server (pid {pid}) on 127.0.0.1:{port}, left running by an earlier run")
            return Adopted("redis", pid)
        raise Fatal(
            f"port {port} is taken by another program. Set {PRIVATE_PORT_VARIABLE} to a free port, "
            "or set REDIS_URL and BUS_REDIS_URL to use a Redis you run."
        )
    binary = shutil.which("redis-server")
    if binary is None:
        raise Fatal("redis-server is not on PATH: run `make setup` (as root it installs Debian's redis-server)")
    log(f"starting a private redis-server on 127.0.0.1:{port} (data in {directory})")
    redis = Child("redis", [
        binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
        "--pidfile", str(pidfile), "--daemonize", "no", "--appendonly", "no", "--loglevel", "warning",
    ], dict(os.environ))
    deadline = time.monotonic() + 10
    while not redis_answer(port):
        if stop_requested.is_set():
            return redis  # main() sees the request and stops it
        if redis.exited() is not None:
            raise Fatal(f"redis-server exited with code {redis.exited()} (its output is above)")
        if time.monotonic() > deadline:
            stop([redis])
            raise Fatal(f"redis-server did not answer on port {port} within 10 s")
        time.sleep(0.05)
    return redis


def manage(env: dict[str, str], *args: str) -> list[str]:
    """Run manage.py in the foreground (Ctrl-C reaches it too) and return its output lines."""
    process = subprocess.Popen(
        [PYTHON, "manage.py", *args], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
    )
    lines = []
    assert process.stdout is not None  # started with stdout=PIPE
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        say("manage", lines[-1])
    if process.wait() != 0 and not stop_requested.is_set():
        raise Fatal(f"manage.py {' '.join(args)} failed with exit code {process.returncode}")
    return lines


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def main() -> int:
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    env = dict(os.environ)
    for name in ("REDIS_URL", "BUS_REDIS_URL", "BUS_REDIS_URLS"):
        if not env.get(name):
            env.pop(name, None)  # set but empty counts as not set
    env.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
    env["PYTHONUNBUFFERED"] = "1"
    var_dir = Path(env.get("BUSCONSOLE_VAR_DIR") or REPO / "var")
    host = env.get("HOST") or "127.0.0.1"
    try:
        port = int(env.get("PORT") or 8000)
        redis_port = int(env.get(PRIVATE_PORT_VARIABLE) or PRIVATE_PORT)
    except ValueError:
        log(f"ERROR: PORT and {PRIVATE_PORT_VARIABLE} must be port numbers")
        return 2
    bus_given = "BUS_REDIS_URL" in env or "BUS_REDIS_URLS" in env
    redis: Child | Adopted | None = None
    services: list[Child] = []
    try:
        if "REDIS_URL" not in env or not bus_given:
            redis = private_redis(redis_port, var_dir)
            if stop_requested.is_set():
                return 130
            env.setdefault("REDIS_URL", f"redis://127.0.0.1:{redis_port}/1")
            if not bus_given:
                env["BUS_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
        log(f"console Redis {env['REDIS_URL']}; monitored {env.get('BUS_REDIS_URLS') or env['BUS_REDIS_URL']}")
        for command in (["migrate", "--noinput"], ["ensure_admin"], ["ensure_alert_rules"]):
            output = manage(env, *command)
            if stop_requested.is_set():
                return 130
        login = [line for line in output if line.startswith("Admin login")]  # printed once, at creation

        # The resident Spark driver (pipeline/service.py): the worker's pipeline runs hand their Spark
        # jobs to it, in a JVM kept warm between runs. Not for a cluster master, whose executors it
        # would hold between runs: there every run starts its own driver.
        spark_socket = env.setdefault("BUSCONSOLE_SPARK_SERVICE", str(var_dir / "spark.sock"))
        services.append(Child("web", [
            PYTHON, "-m", "uvicorn", "busconsole.asgi:application",
            "--host", host, "--port", str(port), "--ws", "websockets",
            # Per-client deflate doubles the live tail's CPU and memory (bench/tail.py).
            "--ws-per-message-deflate", "false",
        ], env))
        for name, argv in celery_workers():
            schedule = ["-s", str(var_dir / "celerybeat-schedule")] if name == "beat" else []
            services.append(Child(name, [*argv, *schedule], env))
        if spark_socket and (env.get("SPARK_MASTER") or "local").startswith("local"):
            services.append(Child("spark", [PYTHON, "-m", "pipeline.service", "--socket", spark_socket], env))
        if env.get("BUSCONSOLE_DEMO", "0" if bus_given else "1") != "1":
            log("no demo traffic (BUSCONSOLE_DEMO=1 writes it into the monitored Redis)")
        else:
            demo_url = env.get("BUS_REDIS_URL") or env["BUS_REDIS_URLS"].split(",")[0].partition("=")[2]
            services.append(Child("demo", [PYTHON, "-m", "eventbus", "demo", "--url", demo_url.strip()], env))

        watched = [*services, *([redis] if redis else [])]
        shown_host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)
        announced = False
        while not stop_requested.is_set():
            for service in list(watched):
                code = service.exited()
                if code == 0 and service.name == "demo":
                    log("demo traffic finished")
                    watched.remove(service)
                elif code is not None:
                    log(f"ERROR: {service.name} exited unexpectedly (code {code}): stopping everything")
                    return 1
            if not announced and port_open(shown_host.strip("[]"), port):
                announced = True
                log(f"busconsole is up: http://{shown_host}:{port}/")
                for line in login or [
                    "Log in as admin: password from BUSCONSOLE_ADMIN_PASSWORD, or the one printed when the "
                    "account was created (setting BUSCONSOLE_ADMIN_PASSWORD resets it)"
                ]:
                    log(line)
                log("Ctrl-C stops everything.")
            stop_requested.wait(0.25)
        log("stopping (Ctrl-C again to kill at once)")
        return 0
    except Fatal as error:
        log(f"ERROR: {error}")
        return 1
    finally:
        stop(services)
        if redis is not None:
            stop([redis])


if __name__ == "__main__":
    sys.exit(main())
