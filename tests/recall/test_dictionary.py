"""English <-> Chinese from a CC-CEDICT file (mdmem.recall.dictionary), the glossary without one."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import Note, NoteType, Store
from mdmem.recall import dictionary, engine
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
def cedict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cedict.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(LINES) + "\n")
    monkeypatch.setenv("MDMEM_DICTIONARY", str(path))
    return path


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
    assert dictionary.database() == first and os.stat(first).st_mtime_ns == built
    with gzip.open(cedict, "at", encoding="utf-8") as f:
        f.write("測試 测试 [ce4 shi4] /to test (machinery etc)/a test/\n")
    second = dictionary.database()
    assert second is not None and second != first
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
