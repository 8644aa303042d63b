"""Exceptions the library's catch-alls let through: raised into its code from outside, they are the caller's.

A few places must answer whatever happens inside them: a search evaluation means "no match" on any error
(:meth:`eventbus.search.query.Query.matches`), and decoding a value renders anything, as hex at worst
(:func:`eventbus.decoding.decode_value`). Each catches ``Exception``. Some exceptions are not about the
value at all but are raised by a signal handler wherever the program happens to be: Celery's soft time
limit (billiard's ``SoftTimeLimitExceeded``, an ``Exception``) is one. Caught there, a job's limit became
one entry's "no match", or one value shown as hex, and the job ran on towards the hard limit's SIGKILL.

The library knows no task queue, so a program that runs it under Celery registers such kinds at start-up
with :func:`let_through`, and every catch-all puts ``except interrupts.LET_THROUGH: raise`` ahead of its
``except Exception``. The tuple is read as ``interrupts.LET_THROUGH``, never imported by name, because
adding a kind replaces it. An ``except`` clause's tuple is only looked at when an exception arrives, so
this costs nothing on the way through.
"""

from __future__ import annotations

LET_THROUGH: tuple[type[BaseException], ...] = ()


def let_through(*kinds: type[BaseException]) -> None:
    """Have the library's catch-alls raise exceptions of ``kinds`` (meant for start-up; a kind added twice
    is kept once)."""
    global LET_THROUGH
    LET_THROUGH = tuple(dict.fromkeys((*LET_THROUGH, *kinds)))
