"""Reading a plain note without YAML (``store/quicknote.py``) gives what the full parse gives.

The search index reads notes this way (the per-prompt hook re-indexes the notes a
turn wrote without importing PyYAML); whatever the text, either the quick read
declines (None) or its fields are exactly those ``note.parse`` reads, and the
index row made from it is the same.
"""

from __future__ import annotations

import string
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PYTHON, python_env
from mdmem._kinds import NoteType
from mdmem.errors import InvalidNote
from mdmem.recall.fts import Index
from mdmem.store import quicknote
from mdmem.store.note import Note, parse, render

# Letters, digits and every character YAML gives a meaning somewhere, and a few others.
_CHARS = (
    string.ascii_letters
    + string.digits
    + " :#-?,[]{}&*!|>'\"%@`~=<.+\t_/\\"
    + "é构—\u3000\u2028\x85"
)
_text = st.text(alphabet=_CHARS, max_size=30)
_words = st.sampled_from(["yes", "No", "TRUE", "off", "null", "Null", "~", "y", "0x1F", "1e3"])
_plainish = st.text(alphabet=string.ascii_letters + " .,'()/:#-é构", min_size=1, max_size=20)
_value = st.one_of(_text, _plainish, _words, _words.map(lambda w: w + " more"))
# The worker's provenance line (manager/provenance.py), and others like it.
_source = st.one_of(
    st.just("turn 20261201093300-1a2b3c4d · anthropic/claude-haiku-4-5 · 2026-12-01T09:33Z"),
    _value.map(lambda v: "turn " + v),
    _value,
)
_moment = st.datetimes(
    min_value=datetime(1000, 1, 1),
    max_value=datetime(9998, 12, 31),
    timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30))]),
).map(lambda m: m.replace(microsecond=0))


def _same(quick: quicknote.QuickNote, full: Note) -> None:
    assert (quick.filename, quick.type, quick.title, quick.summary, quick.body) == (
        full.filename,
        full.type,
        full.title,
        full.summary,
        full.body,
    )
    assert quick.created == full.created and quick.updated == full.updated
    assert quick.extra == full.extra and set(full.extra) <= {"source", "supersedes"}
    assert Index._row(quick, "sha") == Index._row(full, "sha")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(list(NoteType)),
    title=_value,
    summary=_value,
    body=st.text(max_size=80),
    created=st.none() | _moment,
    updated=st.none() | _moment,
    source=st.none() | _source,
)
def test_a_rendered_note_reads_as_the_full_parse_reads_it(  # type: ignore[no-untyped-def]
    kind, title, summary, body, created, updated, source
) -> None:
    if not title.strip():
        title = "t"
    extra = {} if source is None else {"source": source}
    note = Note("n.md", kind, title, summary, body, created, updated, extra)
    text = render(note)
    quick = quicknote.read(text, "n.md")
    if quick is not None:
        _same(quick, parse(text, "n.md"))


_line = st.one_of(
    st.tuples(
        st.sampled_from(
            ["type", "title", "summary", "created", "updated", "tags", "source", "supersedes"]
        ),
        _value,
    ),
    st.tuples(st.just("source"), _source),
    st.tuples(st.sampled_from(["type"]), st.sampled_from([t.value for t in NoteType])),
    st.tuples(
        st.sampled_from(["created", "updated"]),
        st.sampled_from(
            ["2026-01-01T00:00:00+00:00", "2026-13-01T00:00:00+00:00", "2026-01-01T00:00:00+25:00"]
        ),
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from([t.value for t in NoteType]),
    title=_value,
    more=st.lists(_line, max_size=4),
    order=st.randoms(use_true_random=False),
    sep=st.sampled_from([": ", ": ", ": ", ":", ":  "]),
    closing=st.sampled_from(["---", "---", "---", "----", "--- ", "..."]),
    body=st.text(alphabet="ab-\n :#", max_size=20),
    lead=st.sampled_from(["", "\ufeff", "\n\n"]),
)
def test_any_front_matter_either_reads_as_the_full_parse_or_is_declined(  # type: ignore[no-untyped-def]
    kind, title, more, order, sep, closing, body, lead
) -> None:
    lines = [("type", kind), ("title", title), *more]
    order.shuffle(lines)
    head = "\n".join(f"{key}{sep}{value}" for key, value in lines)
    text = f"{lead}---\n{head}\n{closing}\n{body}"
    quick = quicknote.read(text, "n.md")
    try:
        full = parse(text, "n.md")
    except InvalidNote:
        assert quick is None
        return
    if quick is not None:
        _same(quick, full)


@pytest.mark.parametrize(
    "title",
    ["Release deploys", "构建缓存的配置", "Lint settings for the server's ruff (line length 100)"],
)
def test_a_note_mdmem_writes_is_read_quickly(title: str) -> None:
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    note = Note(
        "n.md", NoteType.PROJECT_KNOWLEDGE, title, "One line.", "The body.\n\nMore.", when, when
    )
    quick = quicknote.read(render(note), "n.md")
    assert quick is not None
    _same(quick, parse(render(note), "n.md"))


def test_a_note_the_worker_writes_is_read_quickly() -> None:
    """Every note the worker writes carries its provenance line: the prompt after the
    turn re-indexes it, and must not import YAML to do so (as it did, ~20 ms)."""
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    line = "turn 20261201093300-1a2b3c4d · zero · 2026-12-01T09:33Z · session 3f2a-9c1e"
    note = Note(
        "n.md",
        NoteType.CORRECTION_FEEDBACK,
        "Deploy cache",
        "A day.",
        "B.",
        when,
        when,
        {"source": line},
    )
    text = render(note)
    assert f"\nsource: {line}\n" in text
    quick = quicknote.read(text, "n.md")
    assert quick is not None and quick.extra == {"source": line}
    _same(quick, parse(text, "n.md"))
    # Any other key of a person's is still the full parse's.
    assert quicknote.read(text.replace("source:", "tags:"), "n.md") is None


def test_reading_quickly_imports_no_yaml() -> None:
    probe = (
        "import sys; from mdmem.store import quicknote;"
        " q = quicknote.read('---\\ntype: project_knowledge\\ntitle: A\\n"
        "source: turn 1-a · zero · 2026-12-01T09:33Z\\n---\\nb', 'n.md');"
        " assert q is not None and q.title == 'A';"
        " print(sorted(m for m in ('yaml', 'frontmatter', 'dataclasses', 'mdmem.store.note')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [PYTHON, "-c", probe], capture_output=True, text=True, env=python_env(), check=True
    )
    assert out.stdout.strip() == "[]"


# -- times, read with integers (mdmem._dates), held to datetime's reading ----------


def _two(top: int) -> st.SearchStrategy[str]:
    return st.integers(0, top).map(lambda n: f"{n:02d}")


# Every field anywhere in two (four) digits: days that do not exist, hour 24, offset 24:00.
_shaped = st.builds(
    lambda y, mo, d, h, mi, s, sign, oh, om: f"{y}-{mo}-{d}T{h}:{mi}:{s}{sign}{oh}:{om}",
    st.integers(0, 9999).map(lambda n: f"{n:04d}"),
    _two(19),
    _two(39),
    _two(29),
    _two(69),
    _two(69),
    st.sampled_from("+-"),
    _two(29),
    _two(69),
)


def _datetime_reads(value: str) -> float | None:
    try:
        moment = datetime.fromisoformat(value)
        moment.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None
    return moment.timestamp()


@settings(max_examples=2_000, deadline=None)
@given(_shaped)
def test_a_note_time_is_read_as_datetime_reads_it_or_declined(value: str) -> None:
    quick = quicknote._time(value)
    expected = _datetime_reads(value)
    if quick is False:
        # Declined only where datetime refuses, or for an offset minute field of 60 or more
        # or an hour 24 (which a datetime may take: the full parse then reads them).
        assert expected is None or int(value[23:]) >= 60 or value[11:13] == "24"
    else:
        assert quick == expected


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    st.integers(-23 * 60 - 59, 23 * 60 + 59),
)
def test_every_time_format_time_writes_is_read_without_the_full_parse(
    moment: datetime, minutes: int
) -> None:
    aware = moment.replace(microsecond=0, tzinfo=timezone(timedelta(minutes=minutes)))
    value = aware.isoformat()
    assert quicknote._time(value) == aware.timestamp()
