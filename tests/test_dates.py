"""Dates without ``datetime`` on the prompt hook's path, held to ``datetime`` itself.

``mdmem._dates`` counts days; ``quicknote`` reads a note's times with it
(tests/store/test_quicknote.py) and ``Hit.dated`` shows a recalled note's date
with it. Whatever the input, each gives what ``datetime`` gives.
"""

from __future__ import annotations

import dataclasses
import pickle
from datetime import date, datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem._dates import days, iso_date
from mdmem._kinds import Level
from mdmem.store.hit import Hit

_EPOCH = date(1970, 1, 1)
_FIRST = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


@settings(max_examples=500, deadline=None)
@given(st.dates())
def test_days_counts_from_the_epoch_as_date_does(day: date) -> None:
    assert days(day.year, day.month, day.day) == (day - _EPOCH).days


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=_FIRST, max_value=_LAST, allow_nan=False))
def test_iso_date_is_the_utc_date_of_the_moment(seconds: float) -> None:
    assert iso_date(seconds) == datetime.fromtimestamp(seconds, timezone.utc).date().isoformat()


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=_FIRST + 86_400, max_value=_LAST - 86_400, allow_nan=False))
def test_a_dated_hit_is_the_hit_made_with_its_datetime(seconds: float) -> None:
    made = datetime.fromtimestamp(seconds, timezone.utc)
    fields = ("n.md", Level.PROJECT, "project_knowledge", "Title", "Summary", 1.5)
    lazy = Hit.dated(*fields, updated_at=seconds, snippet="snip")
    eager = Hit(*fields, updated=made, snippet="snip")
    assert lazy.updated_date == eager.updated_date == made.date().isoformat()
    assert lazy == eager and hash(lazy) == hash(eager) and repr(lazy) == repr(eager)
    assert lazy.updated == made
    assert pickle.loads(pickle.dumps(lazy)) == eager
    assert dataclasses.asdict(lazy) == dataclasses.asdict(eager)
    assert dataclasses.replace(lazy, score=2.0).updated == made


def test_a_hit_without_a_time_has_no_date() -> None:
    fields = ("n.md", Level.USER, "user_preference", "Title", "", 0.5)
    for hit in (Hit(*fields), Hit.dated(*fields, updated_at=None)):
        assert hit.updated is None and hit.updated_date is None
    assert Hit(*fields) == Hit.dated(*fields, updated_at=None)
