"""The privacy filter: ``<private>`` blocks out, then the rules over the text as matched.

A text is matched in its visible view (NFKC, without invisible characters), and
what is found there is replaced in the original characters; findings that overlap
become one, named by the most specific kind; markers already in the text are never
matched again. :class:`Redactor` and the module-level helpers live here.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections.abc import Callable, Iterable

from mdmem.privacy._rules import _RANK, _compiled, _Finding, _lower, _Rule

ENV_VAR = "MDMEM_REDACT_PATTERNS"
"""The environment variable holding extra patterns, one per line."""

# Redaction re-runs until nothing new is found; two passes suffice in practice,
# the cap only bounds a pathological custom pattern.
_MAX_PASSES = 4


def _merge(found: list[_Finding]) -> list[_Finding]:
    """Overlapping findings become one, named by the most specific kind among them."""
    found.sort(key=lambda f: (f[1], -f[2]))
    merged: list[_Finding] = []
    for kind, start, end in found:
        if merged and start < merged[-1][2]:
            prev_kind, prev_start, prev_end = merged[-1]
            best = prev_kind if _RANK[prev_kind] <= _RANK[kind] else kind
            merged[-1] = (best, prev_start, max(prev_end, end))
        else:
            merged.append((kind, start, end))
    return merged


def _clip(spans: list[_Finding], holes: list[tuple[int, int]]) -> list[_Finding]:
    """Cut ``holes`` (sorted, disjoint) out of ``spans`` (sorted, disjoint)."""
    out: list[_Finding] = []
    first = 0
    for kind, start, end in spans:
        while first < len(holes) and holes[first][1] <= start:
            first += 1
        cur, j = start, first
        while j < len(holes) and holes[j][0] < end:
            if holes[j][0] > cur:
                out.append((kind, cur, holes[j][0]))
            cur = max(cur, holes[j][1])
            j += 1
        if cur < end:
            out.append((kind, cur, end))
    return out


def _visible(text: str, *, fold: bool = True) -> tuple[str, list[int] | None]:
    """``text`` as matched, and where each of its characters was in ``text`` (None: the same).

    Without invisible characters, and NFKC-normalised one character at a time:
    a key typed in full-width letters (``ｓｋ-ant-…``) or other compatibility
    forms is found like its ASCII twin, and replaced in the original text.
    Without ``fold``, invisible characters only (``<private>`` tags name their
    full-width brackets themselves).
    """
    if text.isascii():
        return text, None
    p = _compiled()
    if not fold:
        if p.invisible.search(text) is None:
            return text, None
        keep = [i for i, ch in enumerate(text) if p.invisible.fullmatch(ch) is None]
        keep.append(len(text))
        return "".join(text[i] for i in keep[:-1]), keep
    table: dict[int, str] = {}
    for ch in set(text):
        if ch < "\x80":
            continue
        if p.invisible.fullmatch(ch) is not None:
            table[ord(ch)] = ""
            continue
        folded = _nfkc(ch)
        if folded != ch:
            table[ord(ch)] = folded
    if not table:
        return text, None
    if all(len(v) == 1 for v in table.values()):
        # One character for one (a full-width letter or comma): the offsets are the same,
        # and a replace per character is the fastest way through long Chinese prose.
        view = text
        for code, folded in table.items():
            view = view.replace(chr(code), folded)
        return view, None
    where: list[int] = []
    for i, ch in enumerate(text):
        into = table.get(ord(ch))
        where.extend([i] * (1 if into is None else len(into)))
    where.append(len(text))
    return text.translate(table), where


@functools.lru_cache(maxsize=4096)
def _nfkc(ch: str) -> str:
    return unicodedata.normalize("NFKC", ch) or ch


def _original(spans: list[_Finding], keep: list[int] | None) -> list[_Finding]:
    """Spans found in a text's visible view, as spans of the text itself."""
    if keep is None:
        return spans
    return [(kind, keep[start], keep[end - 1] + 1) for kind, start, end in spans if end > start]


def _private_spans(view: str, depth: int) -> tuple[list[tuple[int, int]], int]:
    """The ``<private>`` blocks of ``view`` (nesting counted), and the depth left open at its end.

    ``depth`` > 0 means the text starts inside a block opened in an earlier message.
    A self-closing ``<private/>`` opens a block like ``<private>``: it hides the
    rest unless a closing tag follows. A stray closing tag is left as it is.
    """
    spans: list[tuple[int, int]] = []
    begin = 0 if depth > 0 else -1
    for m in _compiled().private_tag.finditer(view):
        if m.group("close") is None:
            if depth == 0:
                begin = m.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((begin, m.end()))
    if depth > 0:
        spans.append((begin, len(view)))
    return spans, depth


def _cut_spans(text: str, spans: list[tuple[int, int]]) -> str:
    parts, pos = [], 0
    for start, end in sorted(spans):
        if start >= pos:
            parts.append(text[pos:start])
        pos = max(pos, end)
    parts.append(text[pos:])
    return "".join(parts)


def _strip_private(text: str, depth: int = 0) -> tuple[str, int]:
    """``text`` without its private blocks, and the depth still open at its end."""
    p = _compiled()
    carried = depth
    for attempt in range(3):
        view, keep = _visible(text, fold=False)
        if carried == 0 and "private" not in view.lower():
            return text, depth
        found, left = _private_spans(view, carried)
        carried = 0
        if attempt == 0:
            depth = left
        elif left:
            depth = max(depth, left)
        if not found:
            return text, depth
        spans = _original([("private", a, b) for a, b in found], keep)
        text = _cut_spans(text, [(a, b) for _, a, b in spans])
    # Removing blocks can join "<priv" and "ate>" into a new tag; rather than
    # loop on adversarial nesting, drop everything from the first such tag.
    view, keep = _visible(text, fold=False)
    m = p.private_tag.search(view)
    if m is None:
        return text, depth
    cut = m.start() if keep is None else keep[m.start()]
    return text[:cut], max(depth, 1)


class Redactor:
    """Replaces secrets with ``[REDACTED:<kind>]`` and drops ``<private>`` blocks."""

    def __init__(self, extra_patterns: Iterable[str | re.Pattern[str]] = ()) -> None:
        """Build a redactor with extra patterns whose whole match is redacted as ``custom``.

        Raises:
            ValueError: a pattern is not a valid regular expression.
        """
        extra: list[_Rule] = []
        for pattern in extra_patterns:
            if isinstance(pattern, str):
                try:
                    pattern = re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"invalid redaction pattern {pattern!r}: {exc}") from exc
            extra.append(_Rule(pattern, "custom"))
        self._extra = tuple(extra)

    def _secrets(self, text: str) -> list[_Finding]:
        """Secrets in ``text`` (already without invisible characters)."""
        p = _compiled()
        low = _lower(text)
        found: list[_Finding] = []
        for rule in p.candidates(text, low):
            found.extend(rule.scan(text, low))
        for rule in self._extra:
            found.extend(rule.scan(text, low))
        if not found:
            return found
        # Markers already in the text are never redacted again: that keeps
        # redaction idempotent and stops a custom pattern feeding on its own output.
        holes = [m.span() for m in p.marker.finditer(text)]
        return _clip(_merge(found), holes)

    def _replace_secrets(self, text: str) -> str:
        for _ in range(_MAX_PASSES):
            view, keep = _visible(text)
            spans = _original(self._secrets(view), keep)
            if not spans:
                break
            parts: list[str] = []
            pos = 0
            for kind, start, end in spans:
                parts += (text[pos:start], f"[REDACTED:{kind}]")
                pos = end
            parts.append(text[pos:])
            text = "".join(parts)
        return text

    def redact(self, text: str) -> str:
        """Return ``text`` without private blocks and with every secret replaced by a marker."""
        return self._replace_secrets(_strip_private(text)[0])

    def redact_many(self, texts: Iterable[str]) -> list[str]:
        """Redact the messages of one conversation, in order.

        A ``<private>`` block opened in one message and closed in a later one
        hides everything in between, the messages in the middle included.
        """
        return [self._replace_secrets(text) for text in self.strip_private_many(texts)]

    def strip_private_many(self, texts: Iterable[str]) -> list[str]:
        """The first step of :meth:`redact_many` alone: private blocks out, secrets still in."""
        out: list[str] = []
        depth = 0
        for text in texts:
            text, depth = _strip_private(text, depth)
            out.append(text)
        return out

    def redact_secrets(self, text: str) -> str:
        """The second step alone: secrets replaced, ``<private>`` tags left as they are."""
        return self._replace_secrets(text)

    def findings(self, text: str) -> list[tuple[str, int, int]]:
        """Return ``(kind, start, end)`` for every secret and ``private`` block in ``text``."""
        view, keep = _visible(text)
        private, _ = _private_spans(view, 0)
        secrets = self._secrets(view)
        # A secret inside a private block is dropped with it, so it is not listed twice.
        kept: list[_Finding] = []
        j = 0
        for finding in secrets:
            while j < len(private) and private[j][1] <= finding[1]:
                j += 1
            if j == len(private) or private[j][0] >= finding[2]:
                kept.append(finding)
        found = _original(kept + [("private", s, e) for s, e in private], keep)
        return sorted(found, key=lambda f: (f[1], f[2]))

    def kinds(self, text: str) -> list[str]:
        """The kinds of what :meth:`redact` would take out of ``text``, sorted, each once."""
        return sorted({kind for kind, _, _ in self.findings(text)})


#: The redactor of the last ``MDMEM_REDACT_PATTERNS`` value seen, with that value.
_default: tuple[str | None, Redactor] | None = None


def redact(text: str) -> str:
    """Redact ``text`` with built-in rules plus ``MDMEM_REDACT_PATTERNS`` (as it is now)."""
    return _default_redactor().redact(text)


def _default_redactor() -> Redactor:
    """The built-in rules plus ``MDMEM_REDACT_PATTERNS``, made again when that changes (the
    prompt server answers each hook with the hook's own environment)."""
    global _default
    value = os.environ.get(ENV_VAR)
    if _default is None or _default[0] != value:
        _default = (value, Redactor(extra_patterns_from_env()))
    return _default[1]


def kinds_found(text: str) -> list[str]:
    """The kinds :func:`redact` would take out of ``text`` (``private`` for a private block)."""
    return _default_redactor().kinds(text)


def redact_data(value: object, redact: Callable[[str], str] | None = None) -> object:
    """A JSON-like value (strings, lists, dicts, keys too) with every string redacted."""
    fn = redact or _default_redactor().redact
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {
            redact_data(k, fn) if isinstance(k, str) else k: redact_data(v, fn)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_data(item, fn) for item in value]
    return value


def install_log_filter(logger_name: str = "mdmem") -> None:
    """Redact every record of the ``mdmem`` logger, whichever handler writes it (once)."""
    import logging

    logger = logging.getLogger(logger_name)
    if _log_filter not in logger.filters:
        logger.addFilter(_log_filter)


def _log_filter(record: object) -> bool:
    try:
        message = record.getMessage()  # type: ignore[attr-defined]
    except Exception:  # a record whose arguments do not fit its format
        return True
    redact = _default_redactor().redact
    clean = redact(str(message))
    if clean != message:
        record.msg, record.args = clean, None  # type: ignore[attr-defined]
    exc_info = getattr(record, "exc_info", None)
    if exc_info and not getattr(record, "exc_text", None):
        import traceback

        # Handlers format a traceback only when exc_text is empty: fill it, redacted.
        text = "".join(traceback.format_exception(*exc_info)).rstrip("\n")
        record.exc_text = redact(text)  # type: ignore[attr-defined]
    return True


def extra_patterns_from_env() -> list[str]:
    """Return the patterns in ``MDMEM_REDACT_PATTERNS``: one per line, invalid ones as literals."""
    patterns: list[str] = []
    for line in os.environ.get(ENV_VAR, "").splitlines():
        pattern = line.strip()
        if not pattern:
            continue
        try:
            re.compile(pattern)
        except re.error:
            # A literal reading is the conservative one for a secret someone typed in.
            pattern = re.escape(pattern)
        patterns.append(pattern)
    return patterns
