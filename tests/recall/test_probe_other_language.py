"""``mdmem eval recall`` in the other language: by CC-CEDICT, or written by the model.

The model's questions come through the real Anthropic SDK against the fake API on
127.0.0.1; the dictionary is a small CC-CEDICT file made here.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from mdmem import Level, Store
from mdmem.__main__ import main
from mdmem.recall.probe import OTHER_MODEL, OTHER_RULES, Probe, other_language

LINES = [
    "發布 发布 [fa1 bu4] /to release/to issue/",
    "標籤 标签 [biao1 qian1] /label/tag/",
    "歸檔 归档 [gui1 dang4] /to file away/archive/",
    "平台 平台 [ping2 tai2] /platform/stage/terrace/",
    "變量 变量 [bian4 liang4] /variable (math.)/",
    "時區 时区 [shi2 qu1] /time zone/",
    "默認 默认 [mo4 ren4] /default/to accept tacitly/",
]
NOTES = {
    "project_knowledge_release.md": (
        "Release process",
        "Push a release tag; the pipeline builds an archive for every platform.",
    ),
    "project_knowledge_timezone.md": (
        "Time zones in quarry",
        "Set the QUARRY_TZ variable to override the zone; the default is the local clock.",
    ),
    "project_knowledge_zh.md": (
        "时区设置",
        "quarry 的默认时区是本地时区，变量 QUARRY_TZ 可以覆盖。",
    ),
}


@pytest.fixture
def project(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    path = tmp_path / "cedict.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(LINES) + "\n")
    monkeypatch.setenv("MDMEM_DICTIONARY", str(path))
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    for name, (title, body) in NOTES.items():
        store.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": title,
                    "content": body,
                    "filename": name,
                }
            ]
        )
    return store


def test_a_probe_is_put_in_the_other_language_word_by_word(project: Store) -> None:
    english = Probe("project", "project_knowledge_release.md", "project_knowledge", "")
    todo = [
        Probe(**{**vars(english), "query": "the release tag for every platform"}),
        Probe("project", "project_knowledge_zh.md", "project_knowledge", "默认的变量"),
        Probe(**{**vars(english), "query": "QUARRY_TZ quarry"}),  # nothing to translate
    ]
    out = other_language(todo)
    # Function words go; words without a translation (every) stay; 的 is grammar.
    assert [p.query for p in out] == ["发布 标签 every 平台", "default variable"]
    assert {p.kind for p in out} == {OTHER_RULES}
    assert [p.filename for p in out] == ["project_knowledge_release.md", "project_knowledge_zh.md"]


def test_eval_recall_reports_the_other_language_probes(
    workspace: Path, project: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--workspace", str(workspace), "eval", "recall", "--questions", "other-language"]
    assert main([*argv, "--lexical", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == OTHER_RULES and report["run"] >= 2
    assert set(report["groups"]) >= {f"kind:{OTHER_RULES}"}


def test_without_the_dictionary_it_says_what_to_install(
    workspace: Path, project: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    from conftest import python_env

    monkeypatch.setenv("MDMEM_DICTIONARY", "off")
    argv = ["--workspace", str(workspace), "eval", "recall", "--questions", "other-language"]
    done = subprocess.run(
        [sys.executable, "-m", "mdmem", *argv],
        env=python_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "dictionary extra" in line and ",dictionary]" in line


_NOTE = re.compile(r'<note id="(n\d+)">\n([^\n]*)\n')
OTHER = {"Release process": "怎么发布新版本？", "Time zones in quarry": "时区怎么设置？"}


def test_the_model_writes_a_question_in_the_other_language_too(
    workspace: Path,
    project: Store,
    fake_anthropic: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in fake_anthropic.env.items():
        monkeypatch.setenv(name, value)

    def answer(body: dict[str, Any]) -> FakeAnthropic.Message:  # type: ignore[name-defined]
        written: dict[str, str] = {}
        for nid, title in _NOTE.findall(body["messages"][-1]["content"]):
            written[nid] = f"what about {title.lower()}?"
            if title in OTHER:
                written[f"{nid}x"] = OTHER[title]
        return FakeAnthropic.text(json.dumps(written, ensure_ascii=False))

    fake_anthropic.enqueue(answer)
    argv = ["--workspace", str(workspace), "eval", "recall", "--level", "project"]
    assert main([*argv, "--questions", "model", "--lexical", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == "model"
    # Three questions in the notes' languages, two in the other one.
    assert report["groups"]["kind:model"]["n"] == 3
    assert report["groups"][f"kind:{OTHER_MODEL}"]["n"] == 2
    [request] = fake_anthropic.requests
    assert "other language" in request.body["system"]
    # The model's client is closed when the command ends: no pooled connection to the
    # fake is left for the garbage collector (an unclosed-socket warning in a later test).
    assert _sockets_to(fake_anthropic.port) == []


def _sockets_to(port: int) -> list[socket.socket]:
    """Open sockets of this process connected to ``127.0.0.1:port``."""
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, socket.socket) and obj.fileno() != -1:
            with contextlib.suppress(OSError):
                if obj.getpeername()[1] == port:
                    found.append(obj)
    return found
