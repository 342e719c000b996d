"""JSON from input mdmem does not control (hook stdin, transcripts, a repository's files).

``json.loads`` raises :class:`RecursionError` for deeply nested input (a few KB
of ``[``), and a ``RecursionError`` is no ``ValueError``: every ``except
ValueError`` around a plain ``json.loads`` lets it through, and a committed
4 KB file of brackets would stop the hooks. :func:`loads` makes it a
``ValueError`` like any other invalid JSON.

:func:`loads` and :func:`dumps` give what ``json.loads`` and ``json.dumps``
(default arguments, or ``ensure_ascii``/``separators``) give, through the
``_json`` C module the ``json`` package itself uses, without importing that
package: the per-prompt hook is a fresh process at every prompt, and the
package's import compiles five regular expressions (~5 M instructions, most
of what the hook's JSON costs). Anything else (invalid input, a byte-order
mark, bytes in another encoding, an interpreter without ``_json``) goes to the
package, so every answer and every error is the package's own
(tests/test_json.py holds them equal).

Floor 0: nothing of mdmem is imported here.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds on the hook's path
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dumps", "loads"]

try:
    import _json as _c
except ImportError:  # pragma: no cover - CPython always has it
    _c = None  # type: ignore[assignment]

_SPACE = " \t\n\r"  # json.decoder.WHITESPACE
# What json.detect_encoding reads as something other than UTF-8.
_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe", b"\x00\x00\xfe\xff")


class _Decoder:
    """The attributes ``_json.make_scanner`` reads from ``json.JSONDecoder()`` (the defaults)."""

    def __init__(self) -> None:
        inf = float("inf")
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = None
        self.parse_float = float
        self.parse_int = int
        self.parse_constant = {"-Infinity": -inf, "Infinity": inf, "NaN": float("nan")}.__getitem__


_scan = _c.make_scanner(_Decoder()) if _c is not None else None  # type: ignore[arg-type]


def _package_loads(data: str | bytes) -> Any:
    import json  # only for what the C scanner alone does not settle: its answer, its error

    return json.loads(data)


def _utf8(data: bytes | bytearray) -> bool:
    """Whether ``json.detect_encoding`` reads ``data`` as UTF-8 without a byte-order mark."""
    if data.startswith(_BOMS):
        return False
    return not ((len(data) == 2 or len(data) >= 4) and (not data[0] or not data[1]))


def _parse(data: str | bytes) -> Any:
    if isinstance(data, (bytes, bytearray)) and _utf8(data):
        data = data.decode("utf-8", "surrogatepass")
    if _scan is None or not isinstance(data, str) or data.startswith("\ufeff"):
        return _package_loads(data)
    start = len(data) - len(data.lstrip(_SPACE))
    try:
        found, end = _scan(data, start)
    except StopIteration:  # no value where one must be: the package's "Expecting value"
        return _package_loads(data)
    if end != len(data) and data[end:].lstrip(_SPACE):
        return _package_loads(data)  # "Extra data"
    return found


def loads(data: str | bytes) -> Any:
    """``json.loads``, with input nested too deeply refused as invalid.

    Raises:
        ValueError: not JSON, not UTF-8, or nested too deeply.
    """
    try:
        return _parse(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _default(o: object) -> object:
    # json.JSONEncoder.default's refusal, word for word.
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def dumps(
    obj: object, *, ensure_ascii: bool = True, separators: tuple[str, str] | None = None
) -> str:
    """``json.dumps(obj, ensure_ascii=..., separators=...)``, the same string.

    Raises:
        TypeError: a value JSON has no form for.
        ValueError: a circular reference.
    """
    if _scan is None:  # pragma: no cover - no C module: the package
        import json

        return json.dumps(obj, ensure_ascii=ensure_ascii, separators=separators)
    quote = _c.encode_basestring_ascii if ensure_ascii else _c.encode_basestring
    if isinstance(obj, str):
        return str(quote(obj))
    item, key = separators if separators is not None else (", ", ": ")
    encode = _c.make_encoder({}, _default, quote, None, key, item, False, False, True)
    return "".join(encode(obj, 0))
