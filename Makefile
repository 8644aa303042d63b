# busconsole: `make run` serves the console with everything it needs, `make test` runs the suite.
# Both call `make setup`, which is idempotent: after the first run it only checks and returns.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system run test fuzz lint bench clean distclean

setup: system $(STAMP)
	@mkdir -p var

# System packages (redis-server, chromium, a Java runtime): installed when missing and root.
system:
	@PYTHON="$(PYTHON)" bash scripts/ensure_system.sh

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstalled only when requirements.txt changes (or the venv is new).
$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@# The repo on the venv's path: bare `pytest` and `python -m eventbus` work from anywhere.
	@$(PY) -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "busconsole-repo.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
	@touch $@

run: setup
	$(PY) scripts/run.py

# Extra pytest arguments: make test ARGS="-k dlq -x"
test: setup
	$(PY) -m pytest $(ARGS)

# The API fuzz tests with many more cases per operation and caller (the suite runs 20), and
# schemathesis's coverage phase for every caller: make fuzz FUZZ_EXAMPLES=1000. No per-test time limit.
FUZZ_EXAMPLES ?= 300
fuzz: setup
	BUSCONSOLE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) BUSCONSOLE_FUZZ_VERBOSE=1 \
		$(PY) -m pytest -p no:cacheprovider -o timeout=0 tests/security/test_fuzz.py $(ARGS)

lint: setup
	$(PY) -m ruff check .

# Every bench/*.py except helpers named _*.py; all run even if one fails, the target fails if any did.
bench: setup
	@status=0; \
	for script in bench/[!_]*.py; do \
		[ -e "$$script" ] || continue; \
		echo "== $$script"; \
		PYTHONPATH=. $(PY) "$$script" || { echo "!! $$script failed"; status=1; }; \
	done; \
	exit $$status

# Caches and build output; keeps the venv and var/ (database, private Redis data).
clean:
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf .pytest_cache .ruff_cache staticfiles spark-warehouse metastore_db derby.log

# Everything `make setup` and `make run` created, including the local database.
distclean: clean
	rm -rf $(VENV) var
