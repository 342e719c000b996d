"""Finding past sessions: ``mdmem search QUERY --sessions`` over the session records.

A sibling of the notes' index (:mod:`mdmem.recall.fts`), with the same
terms (:func:`mdmem.recall.text.terms`: stems, the parts of a path or a
command, CJK bigrams) and the same English ↔ Chinese glossary, in its own
small SQLite FTS5 file beside it (``sessions.sqlite`` in the project store's
state folder). It is derived state: each search brings it in line with the
record files (one ``lstat`` each; a changed file is parsed again), and a
damaged file is rebuilt. So ``billing/retry.py`` is found by "retry", and a
session whose ask was "fix the retry that charges customers twice" by "did we
repair charging twice?".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from dataclasses import dataclass

from mdmem.recall.dictionary import expand
from mdmem.recall.text import terms
from mdmem.store import files
from mdmem.store import sessions as records
from mdmem.store.state import StateDir

__all__ = ["FILE", "SessionHit", "search_sessions"]

FILE = "sessions.sqlite"
_VERSION = "1"
_TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '_./-:@#+'"
#: BM25 weights: goals, summary, files, commands, notes.
WEIGHTS = (3.0, 2.0, 2.0, 1.0, 1.0)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS records(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL,
    st TEXT NOT NULL, data TEXT NOT NULL, terms TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    goals, summary, files, commands, notes, tokenize="{_TOKENIZE}");
"""


@dataclass(frozen=True)
class SessionHit:
    """A session that matches a search: its record, how well, and what matched."""

    session: records.Session
    score: float
    matched: tuple[str, ...]
    """The goals, files or commands of the record that hold a word of the query."""
    coverage: float = 0.0
    """The IDF-weighted share of the query's terms the record holds (0-1)."""

    def as_dict(self) -> dict[str, object]:
        """As ``mdmem search --sessions --json`` shows it: the timeline entry, plus the match."""
        return {**self.session.as_dict(), "score": self.score, "matched": list(self.matched)}


def _stat(path: str) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _open(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=5, isolation_level=None)
    try:
        db.executescript(_SCHEMA)
        row = db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta VALUES('version', ?)", (_VERSION,))
        elif row[0] != _VERSION:
            raise sqlite3.DatabaseError("another version")
    except sqlite3.DatabaseError:
        db.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        db = sqlite3.connect(path, timeout=5, isolation_level=None)
        db.executescript(_SCHEMA)
        db.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (_VERSION,))
    return db


def _connect(store_path: str) -> sqlite3.Connection:
    folder = StateDir.of(store_path).path
    try:
        files.ensure_dir(folder, private=True)
        path = os.path.join(folder, FILE)
        # Owner-only from the start: it holds what the records say (sqlite would use 0644).
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600))
        return _open(path)
    except (OSError, sqlite3.Error):
        return _open(":memory:")  # a read-only state folder: search still answers


def _fields(session: records.Session) -> tuple[str, str, str, str, str]:
    def words(items: list[str]) -> str:
        return " ".join(" ".join(terms(x)) for x in items)

    notes = [n for _, n in session.notes]
    return (
        words([*session.goals, session.title]),
        words([session.summary or records.built_summary(session), session.ended_with]),
        words(session.files),
        words(session.commands + [c for c, _ in session.tests]),
        words(notes),
    )


def _sync(db: sqlite3.Connection, store_path: str) -> None:
    """Bring the index in line with the record files (a changed file is read again)."""
    on_disk: dict[str, str] = {}
    for folder in records.folders(store_path):
        for n, name in enumerate(records._names(folder)):
            if n >= records.MAX_LISTED:
                break
            path = os.path.join(folder, name)
            on_disk[path] = _stat(path)
    known = dict(db.execute("SELECT path, st FROM records").fetchall())
    gone = [p for p in known if p not in on_disk]
    changed = [p for p, st in on_disk.items() if known.get(p) != st]
    if not gone and not changed:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for path in gone + changed:
            row = db.execute("SELECT id FROM records WHERE path=?", (path,)).fetchone()
            if row is not None:
                db.execute("DELETE FROM fts WHERE rowid=?", row)
                db.execute("DELETE FROM records WHERE id=?", row)
        for path in changed:
            session = records._read(path)
            if session is None:
                continue
            data = json.dumps(session.as_dict(), ensure_ascii=False)
            fields = _fields(session)
            cur = db.execute(
                "INSERT INTO records(path, st, data, terms) VALUES(?,?,?,?)",
                (path, on_disk[path], data, " ".join(fields)),
            )
            db.execute(
                "INSERT INTO fts(rowid, goals, summary, files, commands, notes) "
                "VALUES(?,?,?,?,?,?)",
                (cur.lastrowid, *fields),
            )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _session_of(data: str) -> records.Session:
    raw = json.loads(data)
    return records.Session(
        session_id=raw["session_id"],
        started=raw["started"],
        ended=raw["ended"],
        updated=raw["updated"],
        agent=raw["agent"],
        workspace=raw["workspace"],
        branch=raw["branch"],
        summary=raw["summary"],
        ended_with=raw["ended_with"],
        goals=raw["goals"],
        files=raw["files"],
        commands=raw["commands"],
        tests=[(t["command"], t["outcome"] or "") for t in raw["tests"]],
        notes=[(n["level"], n["filename"]) for n in raw["notes"]],
        aliases=raw["aliases"],
        turns=raw["turns"],
        left_out=raw["left_out"],
        path=raw["path"],
    )


def search_sessions(store_path: str, query: str, *, limit: int = 10) -> list[SessionHit]:
    """The sessions of the project store at ``store_path`` that best answer ``query``.

    Ranked by BM25 over the record's fields times the square of its coverage
    (the IDF-weighted share of the query's terms it holds, a translation counting
    for its word), as the notes' engine ranks notes.
    """
    qterms = sorted(set(terms(query)))
    if not qterms or limit <= 0:
        return []
    alternatives = expand(query, qterms)
    db = _connect(store_path)
    try:
        _sync(db, store_path)
        total = db.execute("SELECT count(*) FROM records").fetchone()[0] or 0
        groups = {t: [t, *alternatives.get(t, [])] for t in qterms}
        every = sorted({w for ws in groups.values() for w in ws})
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in every)
        weights = ", ".join(str(w) for w in WEIGHTS)
        rows = db.execute(
            f"SELECT records.data, records.terms, bm25(fts, {weights}) FROM fts "
            "JOIN records ON records.id = fts.rowid WHERE fts MATCH ? "
            "ORDER BY bm25(fts) LIMIT 200",
            (match,),
        ).fetchall()
        df: dict[str, int] = {}
        for w in every:
            df[w] = db.execute(
                "SELECT count(*) FROM fts WHERE fts MATCH ?", ('"' + w.replace('"', '""') + '"',)
            ).fetchone()[0]
    except sqlite3.Error:
        return []
    finally:
        db.close()

    def idf(term: str) -> float:
        n = max(df.get(w, 0) for w in groups[term])
        return math.log((total - n + 0.5) / (n + 0.5) + 1.0)

    weight = {t: idf(t) for t in qterms}
    whole = sum(weight.values()) or 1.0
    hits = []
    for data, words, rank in rows:
        present = set(words.split())
        covered = sum(weight[t] for t in qterms if present & set(groups[t]))
        coverage = covered / whole
        session = _session_of(data)
        wanted = {w for ws in groups.values() for w in ws}
        matched = tuple(
            item
            for item in [*session.goals, *session.files, *session.commands]
            if wanted & set(terms(item))
        )[:5]
        # Coverage first (a record with every word of the question), BM25 to order the rest.
        score = round(coverage**2 * (1.0 - rank), 6)
        hits.append(SessionHit(session, score, matched, round(coverage, 4)))
    hits.sort(key=lambda h: (-h.score, h.session.started), reverse=False)
    return hits[:limit]
