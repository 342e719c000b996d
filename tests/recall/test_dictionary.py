"""English <-> Chinese from a CC-CEDICT file (mdmem.recall.dictionary), the glossary without one."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import create_op
from conftest import PYTHON, python_env
from mdmem import Level, Note, NoteType, Store
from mdmem.recall import dictionary, engine
from mdmem.store import cedict as dfile  # the fixture is called cedict
from mdmem.store.note import render

# CC-CEDICT's format: traditional, simplified, [pinyin], /gloss/gloss/.
LINES = [
    "# CC-CEDICT",
    "# a comment line",
    "鯨魚 鲸鱼 [jing1 yu2] /whale/CL:條|条[tiao2],頭|头[tou2]/",
    "日誌 日志 [ri4 zhi4] /journal/log (computing)/",
    "部署 部署 [bu4 shu3] /to dispose/to deploy/deployment/",
    "某某 某某 [mou3 mou3] /so-and-so, a person whose name is not given/",
    "鯨 鲸 [jing1] /whale/",
    "not a line of the dictionary",
]


@pytest.fixture
def cedict_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small CC-CEDICT file named by MDMEM_DICTIONARY, its SQLite file not built yet."""
    path = tmp_path / "cedict.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(LINES) + "\n")
    monkeypatch.setenv("MDMEM_DICTIONARY", str(path))
    return path


@pytest.fixture
def cedict(cedict_file: Path) -> Path:
    """The same, built (as ``mdmem install`` or a session start leaves it)."""
    assert dictionary.build() is not None
    return cedict_file


def test_a_chinese_word_brings_its_short_glosses_and_an_english_term_its_words(
    cedict: Path,
) -> None:
    assert dictionary.available()
    assert dictionary.expand("鲸鱼什么时候来", ["鲸鱼", "鱼什", "么时", "时候", "候来"]) == {
        "鲸鱼": ["whal"]  # the index's stem of "whale"
    }
    # "to", articles and notes in parentheses go; a gloss that explains is not a translation.
    assert dictionary.expand("日志部署", ["日志", "志部", "部署"]) == {
        "日志": ["journal", "log"],
        "部署": ["deploy", "dispos"],  # "deployment" stems to "deploy"
    }
    assert dictionary.expand("so-and-so", ["so-and-so"]) == {}
    # English terms find the two-character words glossed by them alone (鲸 is one character).
    assert dictionary.expand("where are the whales", ["whal"]) == {"whal": ["鲸鱼"]}
    assert dictionary.expand("deploy logs", ["deploy", "log"]) == {
        "deploy": ["部署"],
        "log": ["日志"],
    }


def test_a_question_in_chinese_finds_an_english_note_the_glossary_cannot(
    cedict: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = Note(
        "project_knowledge_whales.md",
        NoteType.PROJECT_KNOWLEDGE,
        "Whale sightings",
        "The whale sightings are logged in the harbour sheet.",
        "",
    )
    store.root.mkdir(parents=True, exist_ok=True)
    (store.root / note.filename).write_text(render(note), encoding="utf-8")
    store.reindex()
    hits = engine.search([store], "鲸鱼在哪里", semantic=False)
    assert [h.filename for h in hits] == ["project_knowledge_whales.md"]
    monkeypatch.setenv("MDMEM_DICTIONARY", "off")  # the glossary has no whale
    assert engine.search([store], "鲸鱼在哪里", semantic=False) == []


def test_the_dictionary_is_read_once_into_the_state_folder_and_again_when_it_changes(
    cedict: Path,
) -> None:
    first = dictionary.database()
    assert first is not None
    state = Path(os.environ["MDMEM_STATE_DIR"]).resolve()
    assert Path(first).resolve().parent == state / "dictionary"
    built = os.stat(first).st_mtime_ns
    assert dictionary.build() == dictionary.Built(first, False)
    assert os.stat(first).st_mtime_ns == built
    with gzip.open(cedict, "at", encoding="utf-8") as f:
        f.write("測試 测试 [ce4 shi4] /to test (machinery etc)/a test/\n")
    assert dictionary.database() is None  # changed: not built by a read
    made = dictionary.build()
    assert made is not None and made.built
    second = dictionary.database()
    assert second == made.path and second != first
    assert not os.path.exists(first)  # the old file is removed
    assert sorted(os.listdir(Path(second).parent)) == ["build.lock", Path(second).name]


def test_without_a_dictionary_file_the_glossary_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_DICTIONARY", str(tmp_path / "missing.txt"))
    assert not dictionary.available()
    # The glossary's pair: deploy <-> 部署.
    assert dictionary.expand("部署", ["部署"]) == {"部署": ["deploy"]}
    monkeypatch.setenv("MDMEM_DICTIONARY", "off")
    assert dictionary.source() is None


@given(st.lists(st.text(max_size=60), max_size=20))
def test_any_file_reads_without_an_error_into_han_words(lines: list[str]) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
        f.write("\n".join(line.replace("\r", "") for line in lines))
    try:
        chinese, english = dictionary._entries(f.name)
    finally:
        os.unlink(f.name)
    assert all(2 <= len(word) <= 4 and dictionary._HAN.fullmatch(word) for word in chinese)
    assert all(len(words) <= dictionary.PER_TERM for words in english.values())


# -- the file: built once, off the hot path (mdmem.store.cedict) ------------------------


def _whales_and_deploys(workspace: Path) -> Store:
    """A project store with a note only CC-CEDICT finds from Chinese, one the glossary finds."""
    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    for title, content in (
        ("Whale sightings", "The whale sightings are logged in the harbour sheet."),
        ("Deploy steps", "Deploy with make release, then tag the commit."),
    ):
        project.apply([create_op(title, content)])
    return project


def _mdmem(workspace: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(workspace), *args],
        input=stdin,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _built() -> list[str]:
    folder = Path(dfile.folder())
    return sorted(p.name for p in folder.glob("cedict-*")) if folder.is_dir() else []


def test_a_read_without_the_file_builds_nothing_and_answers_with_the_glossary(
    cedict_file: Path, workspace: Path
) -> None:
    """The prompt hook, `mdmem index`, `search` and `recall`, as processes: none builds it."""
    _whales_and_deploys(workspace)
    prompt = json.dumps({"session_id": "s1", "cwd": str(workspace), "prompt": "怎么部署？"})
    hook = _mdmem(workspace, "hook", "user-prompt-submit", stdin=prompt)
    assert hook.returncode == 0 and "Deploy steps" in hook.stdout  # 部署 -> deploy: glossary
    assert _mdmem(workspace, "index").returncode == 0
    found = _mdmem(workspace, "search", "部署")
    assert found.returncode == 0 and "Deploy steps" in found.stdout
    whale = _mdmem(workspace, "search", "鲸鱼在哪里")  # only CC-CEDICT knows 鲸鱼
    assert "Whale sightings" not in whale.stdout
    assert _mdmem(workspace, "recall", "鲸鱼").returncode in (0, 1)
    assert _built() == []
    assert dfile.problem() == "not built yet"
    # The trigger below makes it, and the same search now finds the whale.
    assert dictionary.build() is not None
    assert "Whale sightings" in _mdmem(workspace, "search", "鲸鱼在哪里").stdout


def test_session_start_builds_it_in_the_background_with_mdmem_s_own_child(
    cedict_file: Path, workspace: Path
) -> None:
    _whales_and_deploys(workspace)
    start = json.dumps({"session_id": "s1", "cwd": str(workspace), "source": "startup"})
    done = _mdmem(workspace, "hook", "session-start", stdin=start)
    assert done.returncode == 0 and "additionalContext" in done.stdout
    deadline = time.monotonic() + 120  # a wait for the child, not a measure of its speed
    while dfile.problem() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dfile.problem() is None
    [name] = _built()
    assert name == Path(dictionary.database() or "").name
    assert not list(Path(dfile.folder()).glob("*.partial"))
    assert "Whale sightings" in _mdmem(workspace, "search", "鲸鱼在哪里").stdout
    # Ready now: a second session start leaves it as it is.
    before = os.stat(Path(dfile.folder()) / name).st_mtime_ns
    assert dfile.start_build() is None
    assert _mdmem(workspace, "hook", "session-start", stdin=start).returncode == 0
    assert os.stat(Path(dfile.folder()) / name).st_mtime_ns == before


def test_the_mcp_server_builds_it_in_the_background_when_it_starts(
    cedict_file: Path, workspace: Path
) -> None:
    """An MCP client's session (stdin at its end: the server starts, then stops)."""
    done = subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "mcp"],
        stdin=subprocess.DEVNULL,
        env=python_env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 120  # a wait for the child, not a measure of its speed
    while dfile.problem() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dfile.problem() is None and len(_built()) == 1


def test_doctor_reports_it_missing_and_fix_builds_it(cedict_file: Path, workspace: Path) -> None:
    _whales_and_deploys(workspace)
    report = _mdmem(workspace, "doctor", "--json")
    found = json.loads(report.stdout)["dictionary"]["findings"]
    assert [f["fixable"] and f["problem"] for f in found] == [True]
    assert "not built yet" in found[0]["message"] and _built() == []
    fixed = _mdmem(workspace, "doctor", "--fix")
    assert "fixed: built the dictionary" in fixed.stdout, fixed.stdout + fixed.stderr
    assert dfile.problem() is None and len(_built()) == 1
    again = json.loads(_mdmem(workspace, "doctor", "--json").stdout)["dictionary"]
    assert [f["problem"] for f in again["findings"]] == [False] and again["fixed"] == []


def test_install_claude_code_builds_it(cedict_file: Path, workspace: Path) -> None:
    done = _mdmem(workspace, "install", "claude-code", "--local", "--no-use-login")
    assert done.returncode == 0, done.stderr
    assert "built the dictionary" in done.stdout
    assert dfile.problem() is None


BARRIER = """
import os, sys, time
from mdmem.recall import dictionary
while not os.path.exists(sys.argv[1]):
    time.sleep(0.005)
made = dictionary.build()
print(made.built)
"""


def test_two_builds_at_once_leave_one_good_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes start building together: one builds, the other waits and reads it."""
    path = tmp_path / "big.txt"
    # Enough entries that the two overlap (a build of a few tenths of a second).
    words = [chr(0x4E00 + i) + chr(0x4E00 + j) for i in range(150) for j in range(100)]
    path.write_text(
        "".join(f"{w} {w} [x] /word/thing/\n" for w in words),
        encoding="utf-8",
    )
    monkeypatch.setenv("MDMEM_DICTIONARY", str(path))
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [PYTHON, "-c", BARRIER, str(go)], env=python_env(), stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    go.touch()
    outs = [child.communicate(timeout=120)[0].split() for child in children]
    assert [child.returncode for child in children] == [0, 0]
    assert sorted(out[-1] for out in outs) == ["False", "True"]  # built once
    [name] = _built()
    assert sorted(os.listdir(dfile.folder())) == [dfile.LOCK, name]  # no .partial left
    db = dictionary.database()
    assert db is not None and dfile.ready(db)
    assert dictionary.expand("一丁", ["一丁"]) == {"一丁": ["word"]}


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_file_is_skipped_by_reads_and_rebuilt(
    cedict: Path, workspace: Path, damage: str
) -> None:
    _whales_and_deploys(workspace)
    path = Path(dictionary.database() or "")
    data = path.read_bytes()
    damaged = {"truncated": data[: len(data) // 2], "garbage": b"not sqlite" * 500, "empty": b""}
    path.write_bytes(damaged[damage])
    assert dictionary.database() is None and dfile.problem() == "damaged"
    # A read in a fresh process: the glossary, the file left as it is.
    found = _mdmem(workspace, "search", "部署")
    assert "Deploy steps" in found.stdout and "Whale sightings" not in found.stdout
    assert dfile.problem() == "damaged"
    made = dictionary.build()
    assert made is not None and made.built and made.path == str(path)
    assert dfile.ready(str(path))
    assert "Whale sightings" in _mdmem(workspace, "search", "鲸鱼在哪里").stdout


def _whole_file(folder: Path) -> bytes:
    """A small SQLite file (made once per test, in its tmp_path)."""
    import sqlite3

    path = folder / "whole.sqlite"
    if not path.exists():
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE t (x TEXT)")
        db.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * 200)
        db.commit()
        db.close()
        assert dfile.ready(str(path))
    return path.read_bytes()


@given(st.integers(min_value=0, max_value=10**6))
def test_no_prefix_of_a_whole_file_is_ready(tmp_path: Path, cut: int) -> None:
    whole = _whole_file(tmp_path)
    (tmp_path / "cut.sqlite").write_bytes(whole[: cut % len(whole)])
    assert not dfile.ready(str(tmp_path / "cut.sqlite"))


def test_a_failed_build_is_said_and_not_retried_by_session_starts_for_a_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "broken.txt"
    path.write_bytes(b"\xff\xfe not utf-8\n")
    monkeypatch.setenv("MDMEM_DICTIONARY", str(path))
    with pytest.raises(UnicodeDecodeError):
        dictionary.build()
    failed = dfile.failure()
    assert failed is not None and failed[0] == Path(dfile.target(str(path)) or "").name
    assert "UnicodeDecodeError" in failed[1]
    assert _built() == [] and not list(Path(dfile.folder()).glob("*.partial"))
    assert dfile.start_build() is None  # within a day: not again


def test_the_glossarys_written_out_stems_are_the_stems_of_its_words() -> None:
    # The glossary keeps its words' stems as a table (stemming them all at import cost
    # the per-prompt hook); the table must say what stem() says, for every word.
    from mdmem.recall import glossary
    from mdmem.recall.text import stem

    assert {w: stem(w) for w in glossary.PAIRS} == {
        w: glossary._STEMS.get(w, w) for w in glossary.PAIRS
    }
    assert set(glossary._STEMS) <= set(glossary.PAIRS)


@given(st.text(alphabet="aeiouywxybcdz\n\u00e9A", max_size=6) | st.text(max_size=5))
def test_the_stemmers_letter_tests_are_the_patterns_they_replaced(word: str) -> None:
    # mdmem.recall.text tests a stem's letters without compiling a pattern (the hook's
    # start-up); the answers are the patterns', a final newline included.
    import re

    from mdmem.recall import text

    assert text._has_vowel(word) == bool(re.search(r"[aeiouy]", word))
    assert text._short_cvc(word) == bool(re.match(r"^[^aeiou][aeiouy][^aeiouwxy]$", word))
