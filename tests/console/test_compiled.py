"""``streams_app.perf.compiled``: a query compiled once and run with other values gives what the ORM gives."""

from __future__ import annotations

import logging

from django.contrib.auth.models import Group, User

from streams_app.perf.compiled import compile_once


def test_values_swapped_in_give_the_orms_answer(db) -> None:
    for name in ("ann", "bob", "cy"):
        User.objects.create_user(name, password="x")
    marker = "\x00name\x00"
    compiled = compile_once(User.objects.filter(username=marker), {"name": marker}, expect={"name": 1})
    assert compiled is not None
    for name in ("ann", "bob", "cy", "nobody"):
        raw = [u.pk for u in User.objects.raw(compiled.sql, compiled.args(name=name))]
        assert raw == list(User.objects.filter(username=name).values_list("pk", flat=True))


def test_other_parameters_stay_and_a_marker_must_land_where_expected(db, caplog) -> None:
    Group.objects.create(name="on-call")
    marker = "\x00name\x00"
    query = Group.objects.filter(name=marker) | Group.objects.filter(name="on-call")
    compiled = compile_once(query, {"name": marker}, expect={"name": 1})
    assert compiled is not None and "on-call" in compiled.params
    assert [g.name for g in Group.objects.raw(compiled.sql, compiled.args(name="nobody"))] == ["on-call"]
    # Refused (the caller runs its ORM query), with a warning saying where the markers went.
    with caplog.at_level(logging.WARNING, logger="streams_app.perf.compiled"):
        assert compile_once(query, {"name": marker}, expect={"name": 2}) is None
        assert compile_once(Group.objects.all(), {"name": marker}, expect={"name": 1}) is None
    messages = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(messages) == 2 and all("markers {'name': " in m for m in messages), messages
