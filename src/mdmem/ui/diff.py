"""What changed between two versions of a note, as HTML: ``<del>`` and ``<ins>``, escaped.

Lines are compared with :mod:`difflib`; a replaced line that is still much
like the old one is compared again word by word, so a changed word shows as a
changed word, not as a whole line out and in. Long runs of unchanged lines are
folded to their first and last :data:`CONTEXT` lines.
"""

from __future__ import annotations

import difflib
import re

from mdmem.ui.html import Markup, escape, fill, join

__all__ = ["CONTEXT", "changed_lines", "render"]

#: Unchanged lines shown around a change.
CONTEXT = 3
_WORDS = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
# Past this size a diff is shown line by line only (word diffs of huge lines are slow).
_WORD_DIFF_CHARS = 2_000


def changed_lines(old: str, new: str) -> tuple[int, int]:
    """(lines removed, lines added) from ``old`` to ``new``."""
    removed = added = 0
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return removed, added


def _words(old: str, new: str) -> tuple[Markup, Markup]:
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    left, right = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag == "equal":
            left.append(escape("".join(a[i1:i2])))
            right.append(escape("".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(fill("<del>{t}</del>", t="".join(a[i1:i2])))
        if j2 > j1:
            right.append(fill("<ins>{t}</ins>", t="".join(b[j1:j2])))
    return join(left), join(right)


def _similar(old: str, new: str) -> bool:
    """Whether two lines share most of their words (then a word diff reads well)."""
    a = [w for w in _WORDS.findall(old) if w.strip() and w.isalnum()]
    b = [w for w in _WORDS.findall(new) if w.strip() and w.isalnum()]
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.5


def _line(kind: str, content: Markup) -> Markup:
    sign = {"del": "-", "ins": "+", "same": " "}[kind]
    return fill(
        '<span class="line {kind}"><span class="sign" aria-hidden="true">{sign}</span>'
        "{content}\n</span>",
        kind=kind,
        sign=sign,
        content=content,
    )


def render(old: str, new: str) -> Markup:
    """``old`` against ``new`` as a ``<pre class="diff">``; every text in it is escaped."""
    a, b = old.splitlines(), new.splitlines()
    out: list[Markup] = []
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    if all(tag == "equal" for tag, *_ in opcodes):
        return Markup('<p class="empty">No change in the text.</p>')
    for n, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            run = a[i1:i2]
            head = run[:CONTEXT] if n else []
            tail = run[-CONTEXT:] if n < len(opcodes) - 1 else []
            if len(run) > len(head) + len(tail):
                out += [_line("same", escape(t)) for t in head]
                hidden = len(run) - len(head) - len(tail)
                out.append(
                    fill(
                        '<span class="line fold">… {n} unchanged line{s}\n</span>',
                        n=hidden,
                        s="" if hidden == 1 else "s",
                    )
                )
                out += [_line("same", escape(t)) for t in tail]
            else:
                out += [_line("same", escape(t)) for t in run]
            continue
        olds, news = a[i1:i2], b[j1:j2]
        if tag == "replace" and len(olds) == len(news):
            for x, y in zip(olds, news, strict=True):
                if len(x) + len(y) < _WORD_DIFF_CHARS and _similar(x, y):
                    left, right = _words(x, y)
                    out += [_line("del", left), _line("ins", right)]
                else:
                    out += [
                        _line("del", fill("<del>{t}</del>", t=x)),
                        _line("ins", fill("<ins>{t}</ins>", t=y)),
                    ]
            continue
        out += [_line("del", fill("<del>{t}</del>", t=x)) for x in olds]
        out += [_line("ins", fill("<ins>{t}</ins>", t=y)) for y in news]
    return fill('<pre class="diff">{lines}</pre>', lines=join(out))
