"""CJK runs found character by character are the ones the compiled ranges find.

A Chinese prompt's hook used to compile the CJK ranges' regular expressions (Python's
compiler visits each of their code points: a few milliseconds a process);
``text._cjk_spans`` and ``dictionary._han_runs`` test a short text's characters
against the ranges instead. Both ways must split any text the same: checked on any
text, with the characters at each range's edges (and one past) drawn often.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem.recall import dictionary, text

# Each range's first and last character and its neighbours outside it.
EDGES = sorted(
    {
        chr(ord(ch) + step)
        for first, last in (*text._CJK_RANGES, *dictionary._HAN)
        for ch, step in ((first, -1), (first, 0), (last, 0), (last, 1))
    }
)
TEXTS = st.lists(
    st.one_of(
        st.sampled_from([*EDGES, " ", "?", "的", "什么", "a", "_", ".", "ｃ", "é", "１"]),
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_spans_are_the_patterns(value: str) -> None:
    cjk = re.compile(f"[{text._CJK}]+")
    assert text.spans(value, text._CJK_RANGES) == [m.span() for m in cjk.finditer(value)]
    assert dictionary._han_runs(value) == re.findall(dictionary._HAN_RANGES, value)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_terms_are_the_same_scanned_or_compiled(value: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text, "_scanned", [0])
        text._cjk_run.cache_clear()
        scanned = text.terms(value)
        assert text._cjk_run.cache_info().currsize == 0  # found without the pattern
        patch.setattr(text, "_scanned", [text.SCAN_BUDGET])  # spent: the pattern
        compiled = text.terms(value)
    assert scanned == compiled


def test_a_long_text_compiles_the_pattern_once_the_budget_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(text, "_scanned", [0])
    text._cjk_run.cache_clear()
    assert text.terms("部署 流程") == ["部署", "流程"]
    assert text._cjk_run.cache_info().currsize == 0
    body = "发布分支 " * (text.SCAN_BUDGET // 4 + 1)  # a rebuild's long note
    assert text.terms(body)[:3] == ["发布", "布分", "分支"]
    assert text._cjk_run.cache_info().currsize == 1
    long_query = "部署" * (dictionary._SCAN_MAX // 2 + 1)
    assert dictionary._han_runs(long_query) == [long_query]
