"""The catalog's "written before" comparison is a comparison of times (``mdmem stats``' unused).

``survey.iter_written_before`` and ``count_written_before`` compare a row's
``updated`` as text in SQLite when mdmem wrote it in UTC, and ask the caller's
reading of it otherwise: whatever the time, the offset and the moment asked
about, a row is "written before" exactly when its time is.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from mdmem.store import survey
from mdmem.store.note import format_time


@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.just(0) | st.integers(-23 * 60 - 59, 23 * 60 + 59),  # UTC, as mdmem writes, or not
    st.sampled_from([-1.0, -0.5, -1e-6, 0.0, 1e-6, 0.5, 1.0])
    | st.floats(-2.0, 2.0)
    | st.floats(-1e9, 1e9),
)
def test_the_catalogs_written_before_is_a_comparison_of_times(
    moment: datetime, offset: int, delta: float
) -> None:
    """Whatever a note's time and offset, its row is "written before" exactly when its time is:
    compared as text in SQLite for UTC, through the caller's reading otherwise."""
    when = moment.replace(tzinfo=timezone(timedelta(minutes=offset)))
    updated = format_time(when)
    stamp = datetime.fromisoformat(updated).timestamp()
    since = stamp + delta
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE notes (name TEXT, updated TEXT, line TEXT)")
    con.execute("INSERT INTO notes VALUES ('n.md', ?, 'a line')", (updated,))
    try:
        params = survey.bind_written(
            con, since, lambda name, text: datetime.fromisoformat(str(text)).timestamp()
        )
    except (OverflowError, ValueError, OSError):
        return  # ``since`` outside the years a datetime holds: no such ``now``
    found = con.execute(f"SELECT COUNT(*) FROM notes WHERE {survey._WRITTEN_BEFORE}", params)
    assert found.fetchone()[0] == (1 if stamp < since else 0)
