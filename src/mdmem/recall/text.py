"""Text into search terms: English words stemmed, identifiers whole and in parts, CJK in n-grams.

One function, :func:`terms`, turns any text (a note's field or a query) into
the terms the index stores and the query looks up, so both sides always agree:

- text is NFKC-normalised and case-folded (full-width letters match plain ones);
- an English word loses its inflection (:func:`stem`: ``deploys``, ``deployed``,
  ``deploying`` -> ``deploy``) and common function words are dropped
  (:data:`STOP_WORDS`), so they neither match nor dilute a score;
- an identifier (``QUARRY_TZ``, ``lib/core/logger.dart``, ``camelCase``,
  ``point-in-time``) is kept whole *and* split into its parts, so the exact
  name matches best and a part still matches;
- a run of CJK characters becomes overlapping character n-grams (bigrams by
  default: ``部署流程`` -> ``部署 署流 流程``), since Chinese puts no spaces
  between words; ``benchmarks/bench_recall.py --cjk`` measures uni-, bi- and
  trigrams.

Terms contain only letters, digits, CJK characters and ``_./-:@#+``: the
SQLite tokenizer of the index is told to keep exactly those together.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

TYPE_CHECKING = False  # not typing's: this module is on the per-prompt hook's path
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CJK_NGRAM",
    "CJK_STOP_WORDS",
    "SCAN_BUDGET",
    "STOP_WORDS",
    "TOKEN_CHARS",
    "spans",
    "stem",
    "terms",
]

#: Punctuation that may stand inside an identifier, and so inside a term.
TOKEN_CHARS = "_./-:@#+"
#: The n of the character n-grams a CJK run is cut into.
CJK_NGRAM = 2

# Han (with extensions and compatibility forms), kana, Hangul, CJK symbols: first and last.
_CJK_RANGES = (
    ("\u2e80", "\u2fdf"),
    ("\u3005", "\u3007"),
    ("\u3021", "\u3029"),
    ("\u3040", "\u30ff"),
    ("\u3100", "\u312f"),
    ("\u3131", "\u318e"),
    ("\u31a0", "\u31bf"),
    ("\u31f0", "\u31ff"),
    ("\u3400", "\u4dbf"),
    ("\u4e00", "\u9fff"),
    ("\uac00", "\ud7af"),
    ("\uf900", "\ufaff"),
    ("\U00020000", "\U0003134f"),
)
_CJK = "".join(f"{first}-{last}" for first, last in _CJK_RANGES)
# Word characters (CJK included) with identifier punctuation inside. Kept simple on
# purpose: a character class that excludes the CJK ranges costs ~17 ms to compile,
# and a hook pays that at every prompt; CJK runs are split out afterwards.
_CHUNK = re.compile(r"\w(?:[\w./\-:@#+]*\w)?")
_CLITIC = re.compile(r"(?<=[^\W\d_])['\u2019](?:s|ll|m|re|ve|d|t)\b", re.IGNORECASE)


@lru_cache(maxsize=1)
def _cjk_run() -> re.Pattern[str]:
    """A CJK run: compiled when a text has a character outside ASCII (the ranges cost
    ~1 ms to compile, which an English prompt's hook need not pay)."""
    return re.compile(f"[{_CJK}]+")


#: Characters a process looks at one by one (:func:`_cjk_spans`) before it compiles
#: :func:`_cjk_run` instead: a prompt or a few notes' fields, not a rebuild's every note.
SCAN_BUDGET = 8192
_scanned = [0]


def _cjk_spans(chunk: str) -> list[tuple[int, int]]:
    """Where the CJK runs of ``chunk`` start and end, as ``_cjk_run().finditer`` says.

    Compiling the pattern's ranges is ~2-5 ms (Python's compiler visits each of their
    ~100,000 code points) and a Chinese prompt's hook needs it for a few characters: up
    to :data:`SCAN_BUDGET` characters a process, each is tested against the ranges in
    Python instead (~1 us); past that, or once compiled, the pattern. A test holds the
    two to the same answer for any text.
    """
    if _scanned[0] + len(chunk) > SCAN_BUDGET:
        _scanned[0] = SCAN_BUDGET  # spent for good: every later chunk takes the pattern
        return [run.span() for run in _cjk_run().finditer(chunk)]
    _scanned[0] += len(chunk)
    return spans(chunk, _CJK_RANGES)


def spans(text: str, ranges: Sequence[tuple[str, str]]) -> list[tuple[int, int]]:
    """Where the runs of ``text``'s characters in ``ranges`` (first, last) start and end:
    what ``finditer`` of the class ``[first-last...]+`` says, without compiling it."""
    found: list[tuple[int, int]] = []
    start = -1
    for i, ch in enumerate(text):
        if any(first <= ch <= last for first, last in ranges):
            if start < 0:
                start = i
        elif start >= 0:
            found.append((start, i))
            start = -1
    if start >= 0:
        found.append((start, len(text)))
    return found


#: Chinese function words (question words, modal verbs, particles) that split a CJK run.
CJK_STOP_WORDS = (
    "为什么",
    "怎么样",
    "怎么",
    "怎样",
    "什么",
    "哪里",
    "哪儿",
    "哪个",
    "哪些",
    "如何",
    "应该",
    "是否",
    "可以",
    "能否",
    "一下",
    "的",
    "吗",
    "呢",
    "吧",
    "啊",
)
_INNER = re.compile(r"[_./\-:@#+]+")
# fooBar -> foo Bar, HTTPServer -> HTTP Server, v2Token -> v2 Token
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "e.g",
        "etc",
        "i.e",
        "let",
        "lets",
        "there's",
        "what's",
        "it's",
        "i'm",
        "via",
        "use",
        "used",
        "using",
        "way",
        "ways",
        "thing",
        "things",
        "get",
        "got",
        # what is left of a negative contraction once its clitic is gone (don't -> don)
        "aren",
        "couldn",
        "didn",
        "doesn",
        "don",
        "hadn",
        "hasn",
        "haven",
        "isn",
        "shouldn",
        "wasn",
        "weren",
        "won",
        "wouldn",
    ]
)

# The two tests below were the patterns [aeiouy] and ^[^aeiou][aeiouy][^aeiouwxy]$;
# written out, the per-prompt hook compiles two patterns less (tests/recall/test_dictionary.py
# holds them to the patterns).
_VOWELS = frozenset("aeiouy")


def _short_cvc(word: str) -> bool:
    # A three-letter consonant-vowel-consonant stem (cod, mak, bas) lost an -e.
    if len(word) == 4 and word.endswith("\n"):
        word = word[:3]  # where $ matched, before a final newline
    return (
        len(word) == 3
        and word[0] not in "aeiou"
        and word[1] in "aeiouy"
        and word[2] not in "aeiouwxy"
    )


def _has_vowel(word: str) -> bool:
    return not _VOWELS.isdisjoint(word)


_STEP2 = (
    ("ational", ""),
    ("ate", ""),
    ("ization", "iz"),
    ("isation", "iz"),
    ("ation", ""),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ousness", "ous"),
    ("ments", ""),
    ("ment", ""),
    ("ities", ""),
    ("ity", ""),
    ("ness", ""),
    ("ingly", ""),
    ("edly", ""),
    ("ously", "ous"),
    ("ly", ""),
)


#: Words :func:`stem` and ``_word`` remember (each, least recently used out first). A
#: store's common words repeat and stay; its rare ones (numbers, names) would only fill the
#: caches: at 131,072 and 65,536 entries they held ~45 MiB by the end of a 100,000-note
#: rebuild, half the peak memory a process may have.
WORD_CACHE = 16_384


@lru_cache(maxsize=WORD_CACHE)
def stem(word: str) -> str:
    """A light Porter-style stem of an English word (``configured`` -> ``configur``).

    Only what helps matching: plurals, ``-ed``/``-ing``, a handful of
    derivational endings, and a final ``-e``. Words of three letters or less,
    and anything with a digit, are left alone. Both sides of a match are
    stemmed the same way, so a stem need not be a real word.
    """
    if len(word) <= 3 or not word.isalpha() or not word.isascii():
        return word
    # Step 1a: plurals.
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    # Step 1b: -ed, -ing.
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if _has_vowel(base):
                word = base
                if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                    word = word[:-1]  # stopped -> stop, running -> run
                elif word.endswith(("at", "bl", "iz")) or _short_cvc(word):
                    # Porter's restored -e, so the inflected form meets the bare one:
                    # migrated -> migrate, enabled -> enable, coding -> code, based -> base.
                    word += "e"
                break
    # Step 2/3: derivational endings.
    for suffix, repl in _STEP2:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + repl
            break
    # y -> i, as Porter does, so "deploy"/"deploys" and "retry"/"retries" meet.
    if word.endswith("y") and len(word) > 3 and word[-2] not in "aeiou":
        word = word[:-1] + "i"
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def _word_terms(word: str, out: list[str]) -> None:
    out.extend(_word(word))


@lru_cache(maxsize=WORD_CACHE)
def _word(word: str) -> tuple[str, ...]:
    # Cached: the words of a store repeat, and this is the hot loop of a rebuild.
    low = word.casefold()
    parts = [p for piece in _INNER.split(word) for p in _CAMEL.split(piece) if p]
    if len(parts) > 1:
        # The identifier whole (the exact name matches best), then its parts.
        return (low, *(stem(p) for p in map(str.casefold, parts) if p not in STOP_WORDS))
    if low in STOP_WORDS:
        return ()
    root = stem(low)
    # An inflected stop word ("gets", "uses") is one too.
    return () if root in STOP_WORDS else (root,)


def terms(text: str, *, cjk: int | None = None) -> list[str]:
    """The search terms of ``text``, in order (repeats kept: they count).

    ``cjk`` is the n of the character n-grams for CJK runs (1, 2 or 3; default
    :data:`CJK_NGRAM`); a run shorter than ``n`` is one term.
    """
    n = cjk or CJK_NGRAM
    if text and not text.isascii() and all("\u4e00" <= ch <= "\u9fff" for ch in text):
        # Han characters only (a glossary word, a short Chinese prompt): one CJK run, and
        # NFKC leaves these alone; as below, without compiling the CJK ranges.
        out: list[str] = []
        _run_terms(text, n, out)
        return out
    if text.isascii():
        # Most notes: NFKC leaves ASCII as it is and no chunk holds a CJK run, so each
        # chunk is a word (the loop below, less its tests: the hot loop of a rebuild).
        if "'" in text:
            text = _CLITIC.sub("", text)
        word = _word
        return [term for chunk in _CHUNK.findall(text) for term in word(chunk)]
    text = unicodedata.normalize("NFKC", text)
    if "'" in text or "\u2019" in text:
        # English clitics go with their apostrophe: Lucía's -> Lucía, I'll -> I,
        # don't -> don (a stop word), rather than stray terms "s", "ll", "t".
        text = _CLITIC.sub("", text)
    out = []
    for match in _CHUNK.finditer(text):
        chunk = match.group()
        if chunk.isascii():
            _word_terms(chunk, out)
            continue
        runs = _cjk_spans(chunk)
        if not runs:
            _word_terms(chunk, out)
            continue
        last = 0
        for start, end in runs:
            _words(chunk[last:start], out)
            _run_terms(chunk[start:end], n, out)
            last = end
        _words(chunk[last:], out)
    return out


def _run_terms(run: str, n: int, out: list[str]) -> None:
    """The terms of a CJK run: its character n-grams, between its function words.

    Function words (怎么, 什么, 应该, 的, ...) split a run: they are the Chinese stop
    words, and n-grams across them (么跑, 用什) match noise.
    """
    for piece in _stop_split(run):
        if len(piece) <= n:
            if piece:
                out.append(piece)
        else:
            out.extend(piece[i : i + n] for i in range(len(piece) - n + 1))


def _stop_split(run: str) -> list[str]:
    """``run`` split at :data:`CJK_STOP_WORDS`, as ``re.split`` of their alternation would
    (leftmost first; at one place, the first word in the list that is there)."""
    pieces: list[str] = []
    last = i = 0
    while i < len(run):
        for word in CJK_STOP_WORDS:
            if run.startswith(word, i):
                pieces.append(run[last:i])
                i = last = i + len(word)
                break
        else:
            i += 1
    pieces.append(run[last:])
    return pieces


def _words(text: str, out: list[str]) -> None:
    for match in _CHUNK.finditer(text):
        word = match.group().strip("_")
        if word:
            _word_terms(word, out)
