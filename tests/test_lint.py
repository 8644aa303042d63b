"""The type checker's ground rules hold without running it: `make lint` runs mypy itself (and CI runs
`make lint`); the suite only checks what mypy cannot be asked to keep.

Every ``type: ignore`` names the error it silences and says why (``# type: ignore[code]  # why``): a bare
one hides any new error on its line, and one without a reason cannot be judged when the code around it
changes. mypy's ``ignore-without-code`` catches the first only when it runs; this test catches both in
the suite. Comments are read with :mod:`tokenize`, so a string that mentions the syntax is not a hit.
"""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("streams_app", "eventbus", "busconsole", "pipeline", "tests", "bench", "scripts")
STRICT = ("eventbus.*", "streams_app.redis_ops.*", "streams_app.services.*")

IGNORE = re.compile(r"type:\s*ignore\b(?P<rest>.*)")
# A code list, then a reason as a comment of its own: "type: ignore[attr-defined]  # set by the plugin"
WITH_CODE_AND_REASON = re.compile(r"\[[a-z-]+(?:,\s*[a-z-]+)*\]\s+#\s*\S")


def _ignore_comments(path: Path):
    """(line, comment text) of every comment holding ``type: ignore`` in one file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    for tok in tokens:
        if tok.type == tokenize.COMMENT and IGNORE.search(tok.string):
            yield tok.start[0], tok.string


def test_every_type_ignore_names_its_code_and_reason() -> None:
    bad = []
    for package in CHECKED:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, comment in _ignore_comments(path):
                match = IGNORE.search(comment)
                assert match is not None
                if not WITH_CODE_AND_REASON.match(match.group("rest")):
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {comment.strip()}")
    assert not bad, (
        f"{len(bad)} type: ignore comments without an error code and a reason "
        "(write `# type: ignore[code]  # why`):\n" + "\n".join(bad)
    )


def test_the_pattern_tells_a_bare_ignore_from_a_coded_one() -> None:
    def ok(comment: str) -> bool:
        match = IGNORE.search(comment)
        return bool(match and WITH_CODE_AND_REASON.match(match.group("rest")))

    assert ok("# type: ignore[attr-defined]  # set by Django's plugin at run time")
    assert ok("# type: ignore[arg-type, return-value]  # redis-py types every reply as a union")
    assert not ok("# type: ignore")
    assert not ok("# type: ignore  # why")
    assert not ok("# type: ignore[attr-defined]")
    assert not ok("# type: ignore[]  # why")


def test_make_lint_runs_ruff_and_mypy() -> None:
    makefile = (ROOT / "Makefile").read_text()
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert lint, "Makefile has no lint target"
    assert "ruff check" in lint.group(1) and "mypy" in lint.group(1), lint.group(1)


def test_ci_runs_lint_before_the_suite() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make lint" in ci and "make test" in ci, ci
    assert ci.index("make lint") < ci.index("make test"), "lint runs before the suite (it is the fast part)"


def test_the_bus_the_door_and_the_services_are_strict() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["warn_unused_ignores"] and "ignore-without-code" in config["enable_error_code"]
    strict = [o for o in config["overrides"] if set(STRICT) <= set(o["module"])]
    assert strict, "no override makes eventbus, redis_ops and services strict"
    flags = strict[0]
    for flag in ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
                 "check_untyped_defs", "disallow_any_generics", "warn_return_any", "no_implicit_reexport",
                 "strict_equality", "disallow_untyped_decorators", "disallow_subclassing_any", "extra_checks"):
        assert flags.get(flag) is True, flag
