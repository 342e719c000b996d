"""The search index's note count, kept by SQLite itself (``recall.sqlite``'s ``tally``).

``SELECT count(*) FROM notes`` walks the index of every note's name: ~1,600 page
reads at 100,000 notes, the per-prompt hook's largest read. A one-row table holds
the count instead, changed by a trigger on every row added to or dropped from
``notes``, in the writer's own transaction: whichever code (or version of mdmem)
writes the index, through a rebuild, a bulk build or a kill mid-sync, it is the
notes' count. An index made before the tally gets it in place (:func:`notes`).
"""

from __future__ import annotations

import contextlib

from mdmem._sqlite import sqlite3

__all__ = ["STATEMENTS", "notes"]

#: The table, its triggers and its first count (each statement idempotent).
STATEMENTS = (
    "CREATE TABLE IF NOT EXISTS tally(what TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS notes_added AFTER INSERT ON notes"
    " BEGIN UPDATE tally SET n = n + 1 WHERE what = 'notes'; END",
    "CREATE TRIGGER IF NOT EXISTS notes_dropped AFTER DELETE ON notes"
    " BEGIN UPDATE tally SET n = n - 1 WHERE what = 'notes'; END",
    "INSERT OR IGNORE INTO tally SELECT 'notes', count(*) FROM notes",
)


def notes(db: sqlite3.Connection) -> int:
    """How many notes the index of ``db`` holds: one look-up of the tally.

    An index made before the tally gets its table and triggers, and its notes counted
    once, in one transaction (the count taken is the one the triggers then keep); one
    that cannot be written then (busy past the timeout, read-only) is counted as before.
    """
    try:
        row = db.execute("SELECT n FROM tally WHERE what = 'notes'").fetchone()
    except sqlite3.OperationalError:  # an index made before the tally
        row = None
    if row is not None:
        return int(row[0])
    with contextlib.suppress(sqlite3.Error):
        db.execute("BEGIN IMMEDIATE")
        try:
            for sql in STATEMENTS:
                db.execute(sql)
            row = db.execute("SELECT n FROM tally WHERE what = 'notes'").fetchone()
            db.execute("COMMIT")
            return int(row[0])
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return int(db.execute("SELECT count(*) FROM notes").fetchone()[0])
