"""How well a user's own notes can be found: LLM-free probes built from the notes themselves.

A sentence copied from a note finds that note almost always (its own rare
words are in it), so by default (``source="rules"``) the probes do not copy
the note; per note (or a fixed random sample of a large store):

- ``summary``: the note's summary with every word of its title dropped (the
  title weighs most in the ranking, so the question has to find the note by
  the rest), then made vague as below;
- ``vague``: the body's most telling sentence with its most distinctive half
  dropped (the terms rarest in the store: the identifier, the name a person
  does not remember), keeping at most five of the common words a short, vague
  question would use.

``source="sentences"`` is the earlier probe, the sentence itself. Each note
falls by a hash of its name in the ``dev`` or the ``held-out`` split (one in
three): a user who rewrites notes to score better on ``dev`` checks that the
``held-out`` rates rose too. Each note that a probe did not find in the top 5
comes with the note that was found first instead and why (:func:`_why`): a
near-duplicate, a note that says little of its own, or one outranked by
another's words. :func:`evaluate` runs every probe through the
same ranking as recall and reports hit@1 and hit@5 overall, per level and per
type, and the notes that were hardest to find. It stops at a time limit and
says how many probes it ran.

With ``ask`` (a model, e.g. a provider's ``ask``), :func:`model_questions`
has the model write each probe's query instead: a question in its own words
that the note answers, which tests paraphrase rather than recall of a
sentence, and the same question in the other language (English <-> Chinese).
``source="other-language"`` puts the rule probes in the other language without
a model, word by word with CC-CEDICT (:func:`other_language`). Notes go to the
model in batches of :data:`BATCH`, under made-up ids; a note whose question
does not come back keeps its sentence.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdmem.recall.engine import NEAR_DUPLICATE, index_of, search, similarity
from mdmem.recall.text import terms
from mdmem.recall.weights import term_idf

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mdmem.recall.view import StoreView as Store

__all__ = [
    "BATCH",
    "HELD_OUT_EVERY",
    "OTHER_MODEL",
    "OTHER_RULES",
    "Miss",
    "Probe",
    "Report",
    "evaluate",
    "model_questions",
    "other_language",
    "probes",
    "split_of",
]

#: Notes per request when a model writes the questions.
BATCH = 10
_QUESTION_SYSTEM = (
    "You write test questions for a search engine over a developer's notes. For each note "
    "you are given, write ONE question a developer would ask whose answer is in that note. "
    "Use your own words: do not copy the note's title or its distinctive phrases. Write the "
    "question in the note's language, and under the note's id followed by x the same "
    "question in the other language (Simplified Chinese for a note in English, English for "
    "any other). Reply with only a JSON object that maps each id to its question, e.g. "
    '{"n1": "How do we ...?", "n1x": "我们怎么……？"}.'
)
_NOTE_CHARS = 1500

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_MIN_TERMS = 3
#: Rule-made probes keep at least this many terms (fewer would be a word, not a question).
_MIN_RULE_TERMS = 2
#: A note with fewer distinct terms than this says little of its own.
_FEW_TERMS = 8
#: ... and at most this many content words, as a person's question would.
_MAX_RULE_TERMS = 3
_WORD = re.compile(r"\S+")
#: One note in this many is in the held-out split.
HELD_OUT_EVERY = 3


@dataclass(frozen=True)
class Probe:
    """A query made from a note, and the note that answers it."""

    level: str
    filename: str
    type: str
    query: str
    #: How the query was made: ``sentence``, ``summary``, ``vague`` or ``model``.
    kind: str = "sentence"


@dataclass(frozen=True)
class Miss:
    """A note its probe did not find in the top 5: ``rank`` is its place in the top 10, or None."""

    level: str
    filename: str
    title: str
    query: str
    rank: int | None
    kind: str = "sentence"
    #: The note found first instead, and why the note was missed (for a person).
    found_instead: str = ""
    why: str = ""


@dataclass
class Report:
    """The outcome of :func:`evaluate` (rates are 0-1; ``groups`` maps ``level:x``/``type:x``)."""

    notes: int = 0
    probes: int = 0
    run: int = 0
    hit1: float = 0.0
    hit5: float = 0.0
    groups: dict[str, dict[str, float]] = field(default_factory=dict)
    hard: list[Miss] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False
    source: str = "sentences"
    """Where the queries came from: ``sentences`` of the notes, or ``model``-written."""

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready data."""
        return {
            "notes": self.notes,
            "probes": self.probes,
            "run": self.run,
            "hit@1": round(self.hit1, 4),
            "hit@5": round(self.hit5, 4),
            "groups": self.groups,
            "hard": [vars(m) for m in self.hard],
            "seconds": round(self.seconds, 3),
            "stopped_early": self.stopped_early,
            "source": self.source,
        }


def _pick_sentence(body: str, fallback: str) -> str | None:
    sentences = [s.strip() for s in _SENTENCE.split(body) if len(terms(s)) >= _MIN_TERMS]
    if sentences:
        # The most telling sentence: the one with the most distinct terms.
        return max(sentences, key=lambda s: (len(set(terms(s))), -len(s)))
    return fallback if len(terms(fallback)) >= _MIN_TERMS else None


def _without_title(summary: str, title: str) -> str | None:
    """The summary with every word whose terms are all among the title's dropped."""
    titled = set(terms(title))
    kept = [w for w in _WORD.findall(summary) if not set(terms(w)) <= titled or not terms(w)]
    text = " ".join(kept)
    return text if len(set(terms(text)) - titled) >= _MIN_RULE_TERMS else None


def _vague(sentence: str, df: dict[str, int]) -> str | None:
    """``sentence`` without the words of its rarer half of terms (by document frequency)."""
    own = sorted(set(terms(sentence)), key=lambda t: (df.get(t, 0), t))
    rare = set(own[: len(own) // 2 + len(own) % 2])
    kept: list[str] = []
    count = 0
    for w in _WORD.findall(sentence):
        found = set(terms(w))
        if found & rare:
            continue
        if found and count >= _MAX_RULE_TERMS:
            break  # a question is short: a few of the note's words, not a sentence
        count += bool(found)
        kept.append(w)
    text = " ".join(kept)
    return text if len(set(terms(text))) >= _MIN_RULE_TERMS else None


def split_of(filename: str) -> str:
    """``held-out`` for one note in :data:`HELD_OUT_EVERY` (by a hash of its name), else ``dev``."""
    digest = hashlib.sha256(filename.encode("utf-8")).digest()
    return "held-out" if digest[0] % HELD_OUT_EVERY == 0 else "dev"


def probes(
    stores: Sequence[Store], *, limit: int = 500, seed: int = 0, source: str = "rules"
) -> tuple[list[Probe], int]:
    """Probes for the visible notes of ``stores`` (at most ``limit``, a fixed random sample).

    ``source`` is ``rules`` (the ``summary`` and ``vague`` probes of the module
    docstring) or ``sentences`` (a sentence of the note, copied). Returns the
    probes and how many visible notes there are.
    """
    out: list[Probe] = []
    total = 0
    for store in stores:
        index = index_of(store, fresh=True)  # every note: a full check
        hidden = index.hidden()
        rows = sorted(index.rows(), key=lambda r: r.name)
        df: dict[str, int] = {}
        if source == "rules":
            words = sorted({t for r in rows for t in terms(f"{r.summary} {r.body}")})
            df = index.document_frequency(words) if words else {}
        for row in rows:
            if row.name in hidden:
                continue
            total += 1
            level = store.level.value
            sentence = _pick_sentence(row.body, row.summary)
            if source != "rules":
                if sentence is not None:
                    out.append(Probe(level, row.name, row.type, sentence))
                continue
            summary = _without_title(row.summary, row.title) if row.summary else None
            summary = _vague(summary, df) if summary is not None else None
            if summary is not None:
                out.append(Probe(level, row.name, row.type, summary, "summary"))
            vague = _vague(sentence, df) if sentence is not None else None
            if vague is not None:
                out.append(Probe(level, row.name, row.type, vague, "vague"))
    if len(out) > limit:
        out = sorted(random.Random(seed).sample(out, limit), key=lambda p: (p.level, p.filename))
    return out, total


def _questions_of(text: str) -> dict[str, str]:
    """The ``{id: question}`` object in a model's answer (prose around it is ignored)."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return {str(k): v.strip() for k, v in value.items() if isinstance(v, str) and v.strip()}
        start = text.find("{", start + 1)
    return {}


def model_questions(
    stores: Sequence[Store], todo: Sequence[Probe], ask: Callable[[str, str], str]
) -> list[Probe]:
    """``todo`` with each query replaced by a question the model wrote about its note.

    ``ask(system, prompt)`` returns the model's text. Raises what ``ask`` raises.
    """
    by_level = {store.level.value: store for store in stores}
    out: list[Probe] = []
    for first in range(0, len(todo), BATCH):
        batch = list(todo[first : first + BATCH])
        parts = []
        for i, probe in enumerate(batch, 1):
            note = by_level[probe.level].read(probe.filename)
            text = f"{note.title}\n{note.summary}\n{note.body}"[:_NOTE_CHARS]
            parts.append(f'<note id="n{i}">\n{text}\n</note>')
        written = _questions_of(ask(_QUESTION_SYSTEM, "\n\n".join(parts)))
        for i, probe in enumerate(batch, 1):
            question = written.get(f"n{i}", "")[:500]
            if question:
                out.append(Probe(probe.level, probe.filename, probe.type, question, "model"))
            else:
                out.append(probe)
            other = written.get(f"n{i}x", "")[:500]
            if other and other != question:
                out.append(Probe(probe.level, probe.filename, probe.type, other, OTHER_MODEL))
    return out


#: The kinds of the probes in the other language than their note's.
OTHER_RULES = "other-language"
OTHER_MODEL = "model-other-language"
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def other_language(todo: Sequence[Probe], *, semantic: bool = False) -> list[Probe]:
    """Each rule-made probe put in the other language, word by word, by CC-CEDICT.

    A probe of an English note becomes Chinese: each word with a translation
    becomes the Chinese word the dictionary glosses by it alone, the one closest
    in meaning to the English word by the embedder when ``semantic`` (the
    dictionary's first otherwise: ``log`` is 原木 before 日志); a probe of a
    Chinese note becomes English (each word's first short gloss). A word
    without one stays as it is (an identifier, a name). A probe that gained no
    translated word is dropped: it would only test the note's own words again.
    Raises :class:`~mdmem.errors.MdmemError` when the ``dictionary`` extra is
    missing.
    """
    from mdmem.errors import MdmemError
    from mdmem.recall import dictionary

    if dictionary.available():
        dictionary.build()  # an evaluation may take the seconds; a search never does
    words = dictionary.words() if dictionary.available() else None
    if words is None:
        from mdmem._install import extra_hint

        raise MdmemError(
            "other-language probes need CC-CEDICT, the dictionary extra: "
            + extra_hint("dictionary")
        )
    chosen: dict[str, str | None] = {}

    def chinese(word: str) -> str | None:
        if word not in chosen:
            choices = words.chinese(word)
            if len(choices) > 1 and semantic:
                from mdmem.recall import semantic as embedder

                vectors = embedder.encode([word, *choices])
                closeness = vectors[1:] @ vectors[0]
                choices = [choices[int(closeness.argmax())]]
            chosen[word] = choices[0] if choices else None
        return chosen[word]

    out: list[Probe] = []
    for probe in todo:
        if _HAN.search(probe.query):
            # A lone character without a gloss (的, 里) is grammar, not a word to translate.
            pieces = [
                words.english(w) or ("" if len(w) == 1 and _HAN.match(w) else w)
                for w in dictionary.han_words(probe.query)
            ]
        else:
            # Function words go (a Chinese question has none of "the", "with"); a word
            # without a translation (an identifier, a name) stays.
            pieces = [
                chinese(w.strip(".,;:!?()")) or w for w in _WORD.findall(probe.query) if terms(w)
            ]
        query = " ".join(p for p in pieces if p)
        if query and query != probe.query:
            out.append(Probe(probe.level, probe.filename, probe.type, query, OTHER_RULES))
    return out


def evaluate(
    stores: Sequence[Store],
    *,
    limit: int = 500,
    seconds: float = 60.0,
    semantic: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
    ask: Callable[[str, str], str] | None = None,
    source: str = "rules",
) -> Report:
    """Run the probes of ``stores`` through recall's ranking (see the module docstring).

    ``source``: ``rules`` or ``sentences`` (:func:`probes`), or
    ``other-language`` (the rule probes in the other language,
    :func:`other_language`). ``ask``: a model writes the queries instead
    (:func:`model_questions`, one a note in its language and one in the other);
    the time limit counts from after it has.
    """
    from mdmem.recall import dictionary

    # An evaluation measures what recall does once set up: the dictionary too (a
    # search that finds it missing uses the glossary, and builds nothing).
    dictionary.build()
    rules = "rules" if source == OTHER_RULES else source
    todo, total = probes(stores, limit=limit, source="sentences" if ask else rules)
    if ask is not None and todo:
        todo = model_questions(stores, todo, ask)
    elif source == OTHER_RULES:
        from mdmem.recall.engine import semantic_mode

        todo = other_language(todo, semantic=semantic_mode(semantic))
    started = time.monotonic()
    report = Report(notes=total, probes=len(todo), source="model" if ask else source)
    by_level = {store.level.value: store for store in stores}
    counts: dict[str, list[int]] = {}
    titles: dict[str, str] = {}
    misses: list[Miss] = []
    for done, probe in enumerate(todo, 1):
        if time.monotonic() - started > seconds:
            report.stopped_early = True
            break
        hits = search(stores, probe.query, limit=10, semantic=semantic)
        ranks = [
            i
            for i, h in enumerate(hits, 1)
            if h.filename == probe.filename and h.level.value == probe.level
        ]
        rank = ranks[0] if ranks else None
        if rank is None or rank > 5:
            title = titles.get(probe.filename)
            if title is None:
                title = next(
                    (
                        h.title
                        for h in search(stores, probe.query, limit=50, semantic=False)
                        if h.filename == probe.filename
                    ),
                    probe.filename,
                )
            first = f"{hits[0].level.value}:{hits[0].filename}" if hits else ""
            why = _why(by_level, probe, hits[0] if hits else None)
            misses.append(
                Miss(probe.level, probe.filename, title, probe.query, rank, probe.kind, first, why)
            )
        keys = ("all", f"level:{probe.level}", f"type:{probe.type}", f"kind:{probe.kind}")
        for key in (*keys, f"split:{split_of(probe.filename)}"):
            c = counts.setdefault(key, [0, 0, 0])
            c[0] += 1
            c[1] += rank == 1
            c[2] += rank is not None and rank <= 5
        report.run = done
        if progress is not None:
            progress(done, len(todo))
    overall = counts.get("all", [0, 0, 0])
    report.hit1 = overall[1] / overall[0] if overall[0] else 0.0
    report.hit5 = overall[2] / overall[0] if overall[0] else 0.0
    report.groups = {
        key: {"n": c[0], "hit@1": round(c[1] / c[0], 4), "hit@5": round(c[2] / c[0], 4)}
        for key, c in sorted(counts.items())
        if key != "all"
    }
    misses.sort(key=lambda m: (m.rank is not None, -(m.rank or 0), m.level, m.filename, m.kind))
    report.hard = misses[:20]
    report.seconds = time.monotonic() - started
    return report


def _why(by_level: dict[str, Store], probe: Probe, first: object) -> str:
    """Why ``probe`` missed its note, for a person: what to merge, rewrite or leave."""
    store = by_level[probe.level]
    index = index_of(store)
    rows = index.rows([probe.filename])
    if not rows:
        return "the note could not be read"
    own = set(rows[0].terms.split())
    if len(own) < _FEW_TERMS:
        return f"says little of its own ({len(own)} distinct terms): add what it is about"
    if first is None:
        return "no note matched these words: it is found by other words than a person would use"
    level = getattr(first, "level", None)
    name = str(getattr(first, "filename", ""))
    other_store = by_level.get(getattr(level, "value", ""))
    if other_store is not None:
        other_rows = index_of(other_store).rows([name])
        if other_rows:
            theirs = set(other_rows[0].terms.split())
            words = own | theirs
            df = index.document_frequency(sorted(words))
            total = max(index.count(), 1)
            idf = {t: term_idf(total, df.get(t, 0)) for t in words}
            if similarity(own, theirs, idf) >= NEAR_DUPLICATE:
                return f"a near-duplicate of {name}: worth merging the two"
    return f"{name} matches these words better: the note's own words are elsewhere"
