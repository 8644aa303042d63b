"""The repository's documents are in the repository, and the code points at them by heading.

The reference form, the one the code uses and this file enforces: ``docs/<name>.md#<anchor>``, where
the anchor is the heading's GitHub anchor (lower case, punctuation dropped, spaces as hyphens: the
heading "Errors and status codes" is ``#errors-and-status-codes``), so a reader can follow it on
GitHub and this test can check it. Three checks over every text file of the code's directories:

- no file cites the product's outside documents (the spec's numbered sections, the style guide's
  numbered rules) or an issue number of the tracker: what those held lives under ``docs/`` now, and an
  issue number says when something was done, not what it does;
- every document path under docs named exists, and every ``#anchor`` after one names a heading of it;
- the prose form (the path, a comma, the heading's words) is not used: it cannot be checked, as nothing
  says where the heading ends.

The same anchor check runs over ``README.md``, ``streams_app/README.md``, ``bench/README.md`` and the
links between the documents themselves. Expected anchors come from the Markdown headings, slugged
here by GitHub's rule, not from any list kept in the code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
CODE_DIRS = (
    "streams_app", "eventbus", "busconsole", "pipeline", "bench", "tests", "scripts", "deploy",
    "templates", "static/js", "static/css",
)
READMES = ("README.md", "Makefile")
TEXT_SUFFIXES = {
    ".py", ".md", ".lua", ".html", ".js", ".css", ".sh", ".txt", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".conf", "",
}
SKIP_PARTS = {"__pycache__", ".pytest_cache", "node_modules"}  # static/vendor is not ours: not read

# Spelled in pieces so that this file does not match its own patterns.
_SPEC, _STYLE, _ISSUE = "SP" + "EC", "STY" + "LE", "[Ii]ss" + "ue"
# The spec and the style guide are cited by their names in capitals ("<spec> section 9", "<style> rule
# 4", "the <spec>'s ..."); no other word of the code is spelled that way.
OUTSIDE_DOC = re.compile(rf"\b{_SPEC}\b|\b{_STYLE}\b|\b[Ss]pec (section|§|rule)s?\s*\d")
ISSUE_NUMBER = re.compile(rf"\b{_ISSUE}\s*#?\d+|\b{_ISSUE}s\s+\d+")
DOC_REF = re.compile(r"\bdocs/([\w./-]+?\.md)(#[\w-]+)?")
PROSE_REF = re.compile(r"\bdocs/[\w./-]+?\.md,\s+\"?[A-Z][a-z]")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def _code_files() -> list[Path]:
    files = [REPO / name for name in READMES if (REPO / name).exists()]
    for top in CODE_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            if not path.is_file() or SKIP_PARTS & set(path.parts):
                continue
            if path.suffix in TEXT_SUFFIXES or path.name == "Makefile":
                files.append(path)
    return files


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, inline code and links unwrapped, every
    character but letters, digits, spaces, hyphens and underscores dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> list[str]:
    """The anchors of a document's headings, in order (headings inside code fences are not headings)."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            found.append(slug(match.group(2)))
    return found


def _where(path: Path, text: str, start: int) -> str:
    return f"{path.relative_to(REPO)}:{text.count(chr(10), 0, start) + 1}"


def test_slug_follows_githubs_rule():
    # Worked by hand from GitHub's rendering of the same headings.
    assert slug("Errors") == "errors"
    assert slug("Redis compatibility: TLS, ACL, Sentinel, Cluster") == "redis-compatibility-tls-acl-sentinel-cluster"
    assert slug("The shared websocket frames (`live/wire.py`)") == "the-shared-websocket-frames-livewirepy"
    assert slug('"Looked at N of M"') == "looked-at-n-of-m"
    assert anchors("# A\n```\n# not a heading\n```\n## B c\n") == ["a", "b-c"]


def test_docs_exist_with_unique_headings():
    names = {p.name for p in DOCS.glob("*.md")}
    assert {"architecture.md", "api.md", "operations.md", "performance.md", "decisions.md"} <= names
    for path in sorted(DOCS.glob("*.md")):
        found = anchors(_read(path))
        assert found, f"{path.name} has no heading"
        duplicated = sorted({a for a in found if found.count(a) > 1})
        assert not duplicated, f"{path.name}: headings with the same anchor {duplicated}"


def test_no_outside_document_or_issue_number_is_cited():
    offenders = []
    for path in _code_files():
        text = _read(path)
        for pattern in (OUTSIDE_DOC, ISSUE_NUMBER):
            for match in pattern.finditer(text):
                offenders.append(f"{_where(path, text, match.start())}: {match.group(0)!r}")
    assert not offenders, "cite docs/<file>.md#<heading> instead:\n" + "\n".join(offenders)


def _references() -> list[tuple[Path, str, int, str, str | None]]:
    refs = []
    sources = _code_files() + [REPO / "streams_app" / "README.md", REPO / "bench" / "README.md"]
    for path in dict.fromkeys(sources):
        text = _read(path)
        for match in DOC_REF.finditer(text):
            refs.append((path, text, match.start(), match.group(1), match.group(2)))
    for path in sorted(DOCS.glob("*.md")):  # links between the documents: (api.md#errors) or (#errors)
        text = _read(path)
        for match in re.finditer(r"\]\((?!https?:)([\w./-]*?\.md)?(#[\w-]+)?\)", text):
            target, anchor = match.group(1), match.group(2)
            if target is None and anchor is None:
                continue
            if target is not None and not target.startswith(("../", "/")):
                refs.append((path, text, match.start(), target, anchor))
            elif target is None:
                refs.append((path, text, match.start(), path.name, anchor))
    return refs


def test_every_docs_reference_names_a_file_and_heading_that_exist():
    refs = _references()
    assert any(p.is_relative_to(REPO / "streams_app") for p, *_ in refs), "the code points at docs/ somewhere"
    missing = []
    for path, text, start, name, anchor in refs:
        target = DOCS / name
        if not target.is_file():
            missing.append(f"{_where(path, text, start)}: docs/{name} does not exist")
        elif anchor and anchor[1:] not in anchors(_read(target)):
            missing.append(f"{_where(path, text, start)}: docs/{name} has no heading with anchor {anchor}")
    assert not missing, "\n".join(missing)


def test_references_use_the_anchor_form():
    prose = []
    for path in _code_files():
        text = _read(path)
        prose += [f"{_where(path, text, m.start())}: {m.group(0)!r}" for m in PROSE_REF.finditer(text)]
    assert not prose, "write docs/<file>.md#<anchor>, not 'docs/<file>.md, Heading':\n" + "\n".join(prose)


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("lag (" + _SPEC + " section 9)", True),
        ("(" + _SPEC + " 9)", True),
        (_STYLE + " rule 4", True),
        ("see ../shared/" + _SPEC + ".md", True),
        ("issue" + " 28 item 3", True),
        ("Issue" + " #12", True),
        ("the " + _SPEC + " measures", True),
        ("docs/api.md#errors", False),
        ("a SPECIAL case, STYLES", False),
    ],
)
def test_the_patterns_catch_what_they_should(text, cited):
    assert bool(OUTSIDE_DOC.search(text) or ISSUE_NUMBER.search(text)) is cited
