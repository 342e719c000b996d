"""mdmem._json gives what the json package gives, value for value and error for error.

The hook reads and writes its JSON through the ``_json`` C module without the
``json`` package (its import is most of what JSON costs a fresh process); these
hold the two equal on every input, hostile ones too, and deep nesting refused as
a ValueError.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem import _json

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
)
_KEYS = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS, inner, max_size=5)
    ),
    max_leaves=25,
)


def _same(a: object, b: object) -> bool:
    # NaN is not equal to itself, and 1 == 1.0: compare the values as written out.
    return repr(a) == repr(b)


def _outcome(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    try:
        return "ok", fn(*args, **kwargs)
    except (ValueError, TypeError) as e:
        return type(e).__name__, str(e)


@given(_VALUES, st.booleans(), st.sampled_from([None, (",", ":"), (", ", ": "), (";", "=")]))
@settings(max_examples=300)
def test_dumps_writes_what_json_dumps_writes(value, ascii_only, separators) -> None:  # type: ignore[no-untyped-def]
    want = _outcome(json.dumps, value, ensure_ascii=ascii_only, separators=separators)
    got = _outcome(_json.dumps, value, ensure_ascii=ascii_only, separators=separators)
    assert got == want


def test_dumps_refuses_what_json_dumps_refuses() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert _outcome(_json.dumps, loop) == _outcome(json.dumps, loop)
    assert _outcome(_json.dumps, {"a": {1, 2}}) == _outcome(json.dumps, {"a": {1, 2}})
    assert _outcome(_json.dumps, {(1,): 2}) == _outcome(json.dumps, {(1,): 2})
    hook = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "é\n"}}
    assert _json.dumps(hook, ensure_ascii=False) == json.dumps(hook, ensure_ascii=False)


@given(_VALUES, st.sampled_from(["", " ", "\n\t\r ", "\u00a0", " x", "]", "\ufeff"]))
@settings(max_examples=300)
def test_loads_reads_what_json_loads_reads(value, around) -> None:  # type: ignore[no-untyped-def]
    text = json.dumps(value)
    for shaped in (text, around + text, text + around, around + text + around):
        want, got = _outcome(json.loads, shaped), _outcome(_json.loads, shaped)
        assert got[0] == want[0]
        assert _same(got[1], want[1]) if got[0] == "ok" else got == want
        raw = shaped.encode("utf-8", "surrogatepass")
        want, got = _outcome(json.loads, raw), _outcome(_json.loads, raw)
        assert got[0] == want[0] and (got[0] != "ok" or _same(got[1], want[1]))


@given(st.text(alphabet='[]{}",:0123456789.eE+-tnrufalsNIiy \t\n\r\\\ufeff\x00') | st.text())
@settings(max_examples=500)
def test_loads_of_any_text_answers_or_refuses_as_json_loads(text: str) -> None:
    want, got = _outcome(json.loads, text), _outcome(_json.loads, text)
    assert got[0] == want[0]
    assert _same(got[1], want[1]) if got[0] == "ok" else got == want


@given(st.binary(max_size=40))
def test_loads_of_any_bytes_answers_or_refuses_as_json_loads(data: bytes) -> None:
    want, got = _outcome(json.loads, data), _outcome(_json.loads, data)
    assert got[0] == want[0]
    assert _same(got[1], want[1]) if got[0] == "ok" else got == want


@pytest.mark.parametrize(
    "hostile",
    [
        "[" * 100_000,
        '{"a":' * 100_000,
        "[" * 100_000 + "]" * 100_000,
        "\ufeff{}",
        b"\xef\xbb\xbf{}",
        '{"a": 1} {"b": 2}',
        "NaN",
        "-Infinity",
        '"\\ud800"',
        '{"a": "\x00"}',
        "",
        "   ",
        "1" * 5000,
        "\u3000{}",
        '{"session_id": "s", "prompt": "x", "cwd": "/w"}\n',
        "{}".encode("utf-16"),
        "[1]".encode("utf-32-le"),
    ],
)
def test_hostile_input_is_read_or_refused_as_json_loads_does(hostile: str | bytes) -> None:
    try:
        want = _outcome(json.loads, hostile)
    except RecursionError:
        with pytest.raises(ValueError, match="nested too deeply"):
            _json.loads(hostile)
        return
    got = _outcome(_json.loads, hostile)
    assert got[0] == want[0]
    if got[0] == "ok":
        assert _same(got[1], want[1])
    else:
        assert got == want
