"""The masking policy for people who can write (docs/api.md#masking).

Reading is covered by :mod:`.apply`: everyone sees masked values, and only a role in
``BUSCONSOLE_UNMASKED_ROLES`` may ask for one response unmasked, with an audit row. Two write paths could
still tell a masked value to someone who may not see it, because Redis, not the console, does the work:

- **Copies.** A replay copies entries inside Redis (a Lua script), bytes as stored. Into the same stream
  the copies are masked as the originals are; into another stream they would be masked by *that*
  stream's rules, so ``hr`` replayed into ``hr-copy`` put ``ssn`` in clear before anyone who can read.
  Rule: **a copy keeps the masking of its source.** A replay into another stream is allowed when every
  rule that masks the source (for a DLQ, its origin streams' rules too, as the masker applies them) is
  covered by a rule of the target: one naming the same field or every field, with the same path or a
  shorter one (``*`` matching any segment), hiding at least as much (``mask``/``remove`` cover
  anything; ``hash`` covers only ``hash``). Otherwise only a role that may reveal may make the copy
  (the replay's own audit row lists the rules its copy escapes); anyone else is refused, told which
  rules the target lacks.
- **Matching.** A replay's ``match`` (``{"ssn": "123-45-6789"}``) is compared inside Redis on the
  stored bytes, so its dry-run count answered "is this the value?" for a guess. Rule: **matching on a
  masked field needs the unmasked role.** A match naming a field some rule of the source masks (the
  whole field or a path inside it) is refused to other roles, and recorded in the audit row for the
  roles that may. Search-driven actions need no such rule: they evaluate on masked entries
  (:func:`.apply.search_mask`), so a guess finds nothing.

Hashes (``hash:<12 hex>``) are kept comparable on purpose: that is what the action is for. So anyone who
can write an entry into a stream can learn the hash of a guess (add ``card=<guess>``, read its hash) and
compare it with the hashes shown: ``hash`` suits values whose guesses are too many to try (tokens,
emails among millions) and is the wrong action for low-entropy values such as card numbers, birth dates
or national IDs, which should be ``mask``ed or ``remove``d. The README says so beside the rules.

Requeue needs no check of its own: a dead letter goes back to the stream it came from, whose rules the
masker already applies to the dead letter (:meth:`.apply.Masker.entry`), so its values return to where
they were readable before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied

from eventbus.text import display_text
from streams_app.masking.apply import MASKED_BYTES, Rule, may_reveal, rules_load
from streams_app.redis_ops import conventions

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

_HIDES = frozenset({"mask", "remove"})


def rules_of(key: bytes, rules: Sequence[Rule]) -> list[Rule]:
    """The rules that mask ``key``'s entries: its own, and for a DLQ its origin streams' (by key)."""
    keys = [key, *conventions.dlq_source_streams(key)] if conventions.detect_dlq(key) else [key]
    return list(dict.fromkeys(r for r in rules for k in keys if r.glob.matches(k)))


def _covers(wide: Rule, narrow: Rule) -> bool:
    """Whether ``wide`` hides at least what ``narrow`` hides."""
    if wide.field is not None and wide.field != narrow.field:
        return False
    if len(wide.path) > len(narrow.path):
        return False
    if any(w != "*" and w != n for w, n in zip(wide.path, narrow.path, strict=False)):
        return False
    return wide.action in _HIDES or narrow.action == "hash"


def uncovered(source: bytes, target: bytes, rules: Sequence[Rule]) -> list[Rule]:
    """The rules masking ``source`` that no rule of ``target`` covers: what a copy would escape."""
    if source == target:
        return []
    theirs = [r for r in rules if r.glob.matches(target)]
    return [r for r in rules_of(source, rules) if not any(_covers(t, r) for t in theirs)]


def matching_masked(key: bytes, fields: Iterable[bytes], rules: Sequence[Rule]) -> list[Rule]:
    """The rules of ``key`` that mask one of ``fields`` (the whole field, or a path inside it)."""
    names = set(fields)
    if not names:
        return []
    return [r for r in rules_of(key, rules) if r.field is None or r.field in names]


def match_shown(key: bytes, match: Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    """``match`` as an audit row may keep it: the value of a field some rule masks is masked, since the
    audit log's readers may not see what the role that matched on it may (and its count confirms it)."""
    masked = {r.field for r in rules_of(key, rules_load())}
    hidden = None in masked
    return {name: MASKED_BYTES if hidden or name in masked else value for name, value in match.items()}


def _described(rules: Sequence[Rule]) -> list[str]:
    return list(dict.fromkeys(f"{r.text} ({r.action})" for r in rules))


def write_check(
    *, user: UserLike | None, key: bytes, target: bytes | None = None, match: Iterable[bytes] = ()
) -> dict[str, list[str]]:
    """Apply the policy to a replay (or its dry run) of ``key`` into ``target`` matching ``match``.

    Raises PermissionDenied, saying why and what would allow it, when ``user`` may not see the values
    the action would tell; otherwise returns what it shows that rules hide (``{}`` when nothing), for the
    action's audit row. Call it inside the action's audit block, which records a refusal as denied.
    """
    rules = rules_load()
    escaped = uncovered(key, target, rules) if target is not None else []
    matched = matching_masked(key, match, rules)
    if not escaped and not matched:
        return {}
    if not may_reveal(user):
        if matched:
            raise PermissionDenied(
                "Matching on a masked field needs a role that may see it unmasked: "
                + ", ".join(_described(matched))
                + ". Search instead: a search matches entries as you see them."
            )
        raise PermissionDenied(
            f"A copy keeps the masking of its source: {display_text(target or b'')} is not masked like "
            f"{display_text(key)} ({', '.join(_described(escaped))} has no rule covering it there). "
            "Add masking rules for the target, or replay into the stream itself."
        )
    found: dict[str, list[str]] = {}
    if escaped:
        found["unmasked_copy"] = _described(escaped)
    if matched:
        found["matched_masked"] = _described(matched)
    return found
